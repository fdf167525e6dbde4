// The launch feed's parser (both forms of the completion line) and the collector that turns the feed into
// kernel records for `gearshift run --auto`.
#include <gtest/gtest.h>

#include "runtime/feed.hpp"
#include "runtime/feed_collector.hpp"
#include "trace/iteration.hpp"

namespace gearshift::runtime {
namespace {

TEST(FeedParse, LaunchLine) {
  auto e = parse_feed_line("L 100 7 a kernel name with spaces");
  ASSERT_TRUE(e);
  EXPECT_EQ(e->kind, FeedEvent::Kind::launch);
  EXPECT_EQ(e->cpu_ns, 100);
  EXPECT_EQ(e->correlation, 7);
  EXPECT_EQ(e->name, "a kernel name with spaces");
  EXPECT_FALSE(parse_feed_line("L 100 7"));
  EXPECT_FALSE(parse_feed_line("L 100 7 "));
  EXPECT_FALSE(parse_feed_line("L 100 x a"));
  EXPECT_FALSE(parse_feed_line("L 100-7 a"));
}

TEST(FeedParse, CompletionLineOldAndExtendedForms) {
  auto old = parse_feed_line("C 7 100 200");
  ASSERT_TRUE(old);
  EXPECT_EQ(old->kind, FeedEvent::Kind::complete);
  EXPECT_EQ(old->correlation, 7);
  EXPECT_EQ(old->gpu_start_ns, 100);
  EXPECT_EQ(old->gpu_end_ns, 200);
  EXPECT_EQ(old->stream, 0);
  EXPECT_EQ(old->device, 0);

  auto with_stream = parse_feed_line("C 8 300 400 13");
  ASSERT_TRUE(with_stream);
  EXPECT_EQ(with_stream->stream, 13);
  EXPECT_EQ(with_stream->device, 0);

  auto full = parse_feed_line("C 9 500 650 7 3 ");
  ASSERT_TRUE(full);
  EXPECT_EQ(full->correlation, 9);
  EXPECT_EQ(full->gpu_end_ns, 650);
  EXPECT_EQ(full->stream, 7);
  EXPECT_EQ(full->device, 3);

  EXPECT_FALSE(parse_feed_line("C 7 100"));
  EXPECT_FALSE(parse_feed_line("C 7 100 200 x"));        // stream not a number
  EXPECT_FALSE(parse_feed_line("C 7 100 200 -1"));       // negative stream
  EXPECT_FALSE(parse_feed_line("C 7 100 200 1 2 3"));    // a field too many
  EXPECT_FALSE(parse_feed_line("C 7 100 200 4294967296"));  // stream beyond int32
  EXPECT_FALSE(parse_feed_line("X 1 2 3"));
  EXPECT_FALSE(parse_feed_line(""));
}

TEST(FeedParse, SyncLine) {
  auto e = parse_feed_line("S 12 1000 2500");
  ASSERT_TRUE(e);
  EXPECT_EQ(e->kind, FeedEvent::Kind::sync);
  EXPECT_EQ(e->correlation, 12);
  EXPECT_EQ(e->gpu_start_ns, 1000);
  EXPECT_EQ(e->gpu_end_ns, 2500);
  EXPECT_TRUE(parse_feed_line("S 12 1000 1000 "));
  EXPECT_FALSE(parse_feed_line("S 12 1000"));
  EXPECT_FALSE(parse_feed_line("S 12 2500 1000"));  // returned before it was entered
  EXPECT_FALSE(parse_feed_line("S 12 1000 2500 3"));  // a field too many
  EXPECT_FALSE(parse_feed_line("S x 1000 2500"));
}

TEST(FeedParse, MarkerLine) {
  auto e = parse_feed_line("M 12 1000 1400");
  ASSERT_TRUE(e);
  EXPECT_EQ(e->kind, FeedEvent::Kind::marker);
  EXPECT_EQ(e->correlation, 12);
  EXPECT_EQ(e->gpu_start_ns, 1000);
  EXPECT_EQ(e->gpu_end_ns, 1400);
  EXPECT_FALSE(parse_feed_line("M 12 1400 1000"));  // seen before the poll that had not seen it
  EXPECT_FALSE(parse_feed_line("M 12 1000"));
  EXPECT_FALSE(parse_feed_line("M 12 1000 1400 1"));
}

// Two names alternating on stream 5 of device 1, completions in reverse order within each step.
TEST(FeedCollector, BuildsSortedKernelRecordsFromLaunchesAndCompletions) {
  FeedCollector c(1000);
  const char* names[] = {"gemm_a", "adam_b", "relu_c"};
  std::int64_t corr = 0;
  for (int step = 0; step < 6; ++step) {
    const std::int64_t t0 = step * 1'000'000;
    for (int i = 0; i < 3; ++i) c.add(*parse_feed_line("L " + std::to_string(t0) + " " + std::to_string(corr + i) + " " + names[i]));
    for (int i = 2; i >= 0; --i) {
      const std::int64_t s = t0 + i * 200'000;
      c.add(*parse_feed_line("C " + std::to_string(corr + i) + " " + std::to_string(s) + " " + std::to_string(s + 100'000) + " 5 1"));
    }
    corr += 3;
  }
  c.add(*parse_feed_line("C 999 1 2"));  // no launch seen: counted, not kept
  c.add(*parse_feed_line("S 1000 5 6"));  // a synchronize: no kernel, not unmatched
  EXPECT_EQ(c.launches(), 18u);
  EXPECT_EQ(c.kernels(), 18u);
  EXPECT_EQ(c.unmatched(), 1u);
  trace::Trace t = c.to_trace();
  ASSERT_EQ(t.ops.size(), 18u);
  ASSERT_EQ(t.names.size(), 3u);
  for (std::size_t k = 0; k < t.ops.size(); ++k) {
    EXPECT_EQ(t.name_of(t.ops[k]), names[k % 3]) << k;
    EXPECT_EQ(t.ops[k].start_ns, static_cast<std::int64_t>(k / 3) * 1'000'000 + static_cast<std::int64_t>(k % 3) * 200'000);
    EXPECT_EQ(t.ops[k].duration_ns, 100'000);
    EXPECT_EQ(t.ops[k].stream, 5);
    EXPECT_EQ(t.ops[k].device, 1);
    EXPECT_EQ(t.ops[k].correlation, static_cast<std::int64_t>(k));
  }
  auto it = trace::detect_iterations(t);
  EXPECT_GE(it.iterations.size(), 5u);
  EXPECT_EQ(it.tmpl.kernels, 3u);
}

TEST(FeedCollector, KeepsEveryCompletionOfAGraphLaunch) {
  // One L line per graph launch, one C line per kernel it ran, all with the launch's correlation (before: only
  // the first completion was kept, the launch then erased and the others dropped as unmatched).
  FeedCollector c(1000);
  std::int64_t corr = 10;
  for (int step = 0; step < 4; ++step) {
    const std::int64_t t0 = step * 1'000'000;
    const std::int64_t g = corr++, adam = corr++;
    c.add(*parse_feed_line("L " + std::to_string(t0) + " " + std::to_string(g) + " cudaGraphLaunch graph=3"));
    c.add(*parse_feed_line("L " + std::to_string(t0 + 5) + " " + std::to_string(adam) + " multi_tensor_apply_kernel<FusedAdamMathFunctor>"));
    for (int k = 0; k < 5; ++k) {
      const std::int64_t s = t0 + k * 100'000;
      c.add(*parse_feed_line("C " + std::to_string(g) + " " + std::to_string(s) + " " + std::to_string(s + 90'000) + " 7 0"));
    }
    c.add(*parse_feed_line("C " + std::to_string(adam) + " " + std::to_string(t0 + 600'000) + " " + std::to_string(t0 + 700'000) + " 7 0"));
  }
  EXPECT_EQ(c.launches(), 8u);
  EXPECT_EQ(c.kernels(), 24u);
  EXPECT_EQ(c.unmatched(), 0u);
  trace::Trace t = c.to_trace();
  std::size_t in_graph = 0;
  for (const auto& r : t.ops) {
    if (t.name_of(r) != "cudaGraphLaunch graph=3") continue;
    ++in_graph;
    EXPECT_EQ(r.graph_id, 3u);
  }
  EXPECT_EQ(in_graph, 20u);
  // The template holds the graph's five kernels as one launch unit.
  auto it = trace::detect_iterations(t);
  EXPECT_EQ(it.tmpl.kernels, 6u);
  std::size_t unit0 = 0;
  for (const auto& op : it.tmpl.ops) unit0 += op.graph_launch == 0;
  EXPECT_EQ(unit0, 5u);
}

TEST(FeedCollector, KeepsAtMostMaxKernels) {
  FeedCollector c(2);
  for (int i = 0; i < 5; ++i) {
    c.add(*parse_feed_line("L 1 " + std::to_string(i) + " k"));
    c.add(*parse_feed_line("C " + std::to_string(i) + " 10 20"));
  }
  EXPECT_EQ(c.launches(), 5u);
  EXPECT_EQ(c.kernels(), 2u);
  EXPECT_TRUE(c.full());
  EXPECT_EQ(c.to_trace().ops.size(), 2u);
}

}  // namespace
}  // namespace gearshift::runtime
