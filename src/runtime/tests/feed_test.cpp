// The collector that turns the launch feed into kernel records for `gearshift run --auto` (the protocol's own
// tests: src/feed/tests/protocol_test.cpp).
#include <gtest/gtest.h>

#include "feed/protocol.hpp"
#include "runtime/feed_collector.hpp"
#include "trace/iteration.hpp"

namespace gearshift::runtime {
namespace {

using feed::parse_feed_line;

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

// The job's synchronizes (S lines) go into the trace, so that the template places them and the CPU waits in the
// model where the job waited (trace/cpu_timeline.hpp). Before, the trace held none and said nothing of them.
TEST(FeedCollector, TheTraceHoldsTheJobsSynchronizes) {
  FeedCollector c(1000);
  c.add(*parse_feed_line("L 100 1 gemm"));
  c.add(*parse_feed_line("C 1 200 900 7 0"));
  EXPECT_FALSE(c.to_trace().syncs_recorded);  // none sent yet: the trace does not claim to hold them
  c.add(*parse_feed_line("S 2 5000 6500"));
  c.add(*parse_feed_line("S 3 300 950"));  // two threads' synchronizes may arrive out of order
  const trace::Trace t = c.to_trace();
  EXPECT_TRUE(t.syncs_recorded);
  ASSERT_EQ(t.syncs.size(), 2u);
  EXPECT_EQ(t.syncs[0].correlation, 3);
  EXPECT_EQ(t.syncs[0].enter_ns, 300);
  EXPECT_EQ(t.syncs[0].duration_ns, 650);
  EXPECT_EQ(t.syncs[0].scope, trace::SyncRecord::Scope::device);  // an S line does not name a stream
  EXPECT_EQ(t.syncs[1].enter_ns, 5000);
  EXPECT_EQ(t.syncs[1].duration_ns, 1500);
  EXPECT_EQ(c.sync_exits(), (std::vector<std::int64_t>{6500, 950}));  // arrival order, for the live check
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

TEST(FeedCollector, NamesAGraphsKernelsByTheirOwnNameLines) {
  // A graph's kernels named by N lines keep their own names (so that the model classes them as a trace does);
  // before, all were named after the launch and classed "other" (torch.compile's plan was refused on power).
  FeedCollector c(1000);
  c.add(*parse_feed_line("N 0 ampere_bf16_s16816gemm_bf16_128x128_ldg8_f2f_nn"));
  c.add(*parse_feed_line("N 1 void at::native::vectorized_elementwise_kernel<4, at::native::GeluCUDAKernelImpl>"));
  std::int64_t corr = 10;
  for (int step = 0; step < 4; ++step) {
    const std::int64_t t0 = step * 1'000'000, g = corr++, adam = corr++;
    c.add(*parse_feed_line("L " + std::to_string(t0) + " " + std::to_string(g) + " cudaGraphLaunch graph=3"));
    c.add(*parse_feed_line("L " + std::to_string(t0 + 5) + " " + std::to_string(adam) + " multi_tensor_apply_kernel<FusedAdamMathFunctor>"));
    for (int k = 0; k < 4; ++k) {
      const std::int64_t s = t0 + k * 100'000;
      c.add(*parse_feed_line("C " + std::to_string(g) + " " + std::to_string(s) + " " + std::to_string(s + 90'000) +
                             " 7 0 " + std::to_string(k % 2)));
    }
    c.add(*parse_feed_line("C " + std::to_string(adam) + " " + std::to_string(t0 + 600'000) + " " + std::to_string(t0 + 700'000) + " 7 0"));
  }
  c.add(*parse_feed_line("L 5000000 99 cudaGraphLaunch graph=3"));
  c.add(*parse_feed_line("C 99 5000000 5000100 7 0 7"));  // an id no N line named: the launch's name
  trace::Trace t = c.to_trace();
  ASSERT_EQ(t.ops.size(), 21u);
  for (std::size_t i = 0; i < 20; ++i) {
    const std::size_t k = i % 5;  // the graph's four kernels, then the optimizer's
    EXPECT_EQ(t.name_of(t.ops[i]), k == 4   ? "multi_tensor_apply_kernel<FusedAdamMathFunctor>"
                                   : k % 2 == 0 ? "ampere_bf16_s16816gemm_bf16_128x128_ldg8_f2f_nn"
                                                : "void at::native::vectorized_elementwise_kernel<4, at::native::GeluCUDAKernelImpl>")
        << i;
    EXPECT_EQ(t.ops[i].graph_id, k == 4 ? 0u : 3u);
  }
  EXPECT_EQ(t.name_of(t.ops[20]), "cudaGraphLaunch graph=3");
  // Still one launch unit per graph launch in the template.
  auto it = trace::detect_iterations(t);
  EXPECT_EQ(it.tmpl.kernels, 5u);
  std::size_t unit0 = 0;
  for (const auto& op : it.tmpl.ops) unit0 += op.graph_launch == 0;
  EXPECT_EQ(unit0, 4u);
}

// Copies and memsets (Y lines) are the template's memcpy and memset ops: without them a step's copies were idle
// time to the model (Megatron-LM: ~1,330 a step; its calibration put 569 W instead of 422 W in memory/uncore
// power and `run --auto` refused it, H200 session 24). They have no launch: not counted as launches, no launch
// time; one with a pending graph launch's correlation ran in that graph.
TEST(FeedCollector, KeepsCopiesAndMemsetsAsTheirOwnOps) {
  FeedCollector c(1000);
  std::int64_t corr = 0;
  for (int step = 0; step < 6; ++step) {
    const std::int64_t t0 = step * 1'000'000;
    const std::int64_t gemm = corr++, copy = corr++, set = corr++, adam = corr++;
    c.add(*parse_feed_line("L " + std::to_string(t0) + " " + std::to_string(gemm) + " gemm_a"));
    c.add(*parse_feed_line("L " + std::to_string(t0 + 10) + " " + std::to_string(adam) + " adam_b"));
    c.add(*parse_feed_line("C " + std::to_string(gemm) + " " + std::to_string(t0) + " " + std::to_string(t0 + 300'000) + " 5 0"));
    c.add(*parse_feed_line("Y " + std::to_string(copy) + " " + std::to_string(t0 + 300'000) + " " +
                           std::to_string(t0 + 500'000) + " 5 0 1048576 c Memcpy DtoD (Device -> Device)"));
    c.add(*parse_feed_line("Y " + std::to_string(set) + " " + std::to_string(t0 + 500'000) + " " +
                           std::to_string(t0 + 550'000) + " 5 0 4096 s Memset (Device)"));
    c.add(*parse_feed_line("C " + std::to_string(adam) + " " + std::to_string(t0 + 550'000) + " " + std::to_string(t0 + 700'000) + " 5 0"));
  }
  c.add(*parse_feed_line("L 7000000 90 cudaGraphLaunch graph=4"));
  c.add(*parse_feed_line("Y 90 7000000 7000100 5 0 64 c Memcpy DtoD (Device -> Device)"));  // a graph's copy node
  EXPECT_EQ(c.launches(), 13u);
  EXPECT_EQ(c.kernels(), 12u);
  EXPECT_EQ(c.copies(), 13u);
  EXPECT_EQ(c.ops(), 25u);
  EXPECT_EQ(c.unmatched(), 0u);  // a copy needs no launch
  trace::Trace t = c.to_trace();
  ASSERT_EQ(t.ops.size(), 25u);
  EXPECT_EQ(t.ops[1].kind, trace::OpKind::memcpy);
  EXPECT_EQ(t.name_of(t.ops[1]), "Memcpy DtoD (Device -> Device)");
  EXPECT_EQ(t.ops[1].duration_ns, 200'000);
  EXPECT_EQ(t.ops[1].bytes, 1'048'576);
  EXPECT_EQ(t.ops[1].launch_ns, -1);
  EXPECT_EQ(t.ops[1].graph_id, 0u);
  EXPECT_EQ(t.ops[2].kind, trace::OpKind::memset);
  EXPECT_EQ(t.ops[2].bytes, 4096);
  EXPECT_EQ(t.ops[24].graph_id, 4u);
  EXPECT_EQ(t.ops[24].launch_ns, 7'000'000);  // its graph launch's
  // The steps hold their copies: 2 kernels and 4 ops per step.
  t.ops.pop_back();
  auto it = trace::detect_iterations(t);
  EXPECT_GE(it.iterations.size(), 5u);
  EXPECT_EQ(it.tmpl.kernels, 2u);
  EXPECT_EQ(it.tmpl.ops.size(), 4u);
}

TEST(FeedCollector, KeepsAtMostMaxKernels) {
  FeedCollector c(2);
  for (int i = 0; i < 5; ++i) {
    c.add(*parse_feed_line("L 1 " + std::to_string(i) + " k"));
    c.add(*parse_feed_line("C " + std::to_string(i) + " 10 20"));
  }
  c.add(*parse_feed_line("Y 9 30 40 0 0 8 c Memcpy"));  // a full collection keeps no copy either
  EXPECT_EQ(c.launches(), 5u);
  EXPECT_EQ(c.kernels(), 2u);
  EXPECT_EQ(c.copies(), 0u);
  EXPECT_TRUE(c.full());
  EXPECT_EQ(c.to_trace().ops.size(), 2u);
}

}  // namespace
}  // namespace gearshift::runtime
