#include "cupti/runtime_feed.hpp"

#include <fcntl.h>
#include <time.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <sstream>
#include <string>
#include <vector>

namespace gearshift::cupti {
namespace {

std::int64_t mono_ns() {
  timespec ts{};
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<std::int64_t>(ts.tv_sec) * 1'000'000'000 + ts.tv_nsec;
}

// A stand-in CUPTI clock: CLOCK_MONOTONIC minus 5 s.
constexpr std::int64_t kSkew = 5'000'000'000;
std::int64_t cupti_clock() { return mono_ns() - kSkew; }

std::vector<std::string> read_lines(int fd) {
  std::string all;
  char buf[4096];
  for (ssize_t n; (n = read(fd, buf, sizeof buf)) > 0;) all.append(buf, static_cast<std::size_t>(n));
  std::vector<std::string> lines;
  std::stringstream ss(all);
  for (std::string l; std::getline(ss, l);) lines.push_back(l);
  return lines;
}

TEST(RuntimeFeedClock, OffsetRelatesTheClocksWithinAMicrosecond) {
  std::int64_t off = monotonic_offset_ns(&cupti_clock);
  EXPECT_NEAR(static_cast<double>(off), static_cast<double>(kSkew), 1000.0);
}

TEST(RuntimeFeed, WritesLaunchesAndCompletionsInMonotonicTime) {
  int p[2];
  ASSERT_EQ(pipe(p), 0);
  static const char* const kGelu = "_Z4geluPf";
  std::int64_t t0 = cupti_clock();
  {
    RuntimeFeed feed(p[1], &cupti_clock, 200'000);
    feed.on_launch(LaunchEvent{1, LaunchApi::kernel, t0, kGelu});
    // A graph launch is one launch of the template, named after its graph.
    feed.on_launch(LaunchEvent{2, LaunchApi::graph, t0 + 10, nullptr, -1, 5});
    feed.on_launch(LaunchEvent{3, LaunchApi::kernel_ex, t0 + 20, "ampere_sgemm_128x64_nn"});
    feed.on_launch(LaunchEvent{4, LaunchApi::unknown, t0 + 30, nullptr, t0 + 5000});  // a synchronize
    feed.on_kernel_complete(1, t0 + 1000, t0 + 3000, 7, 0);
    feed.stop();
    FeedStats st = feed.stats();
    EXPECT_EQ(st.launches, 3u);
    EXPECT_EQ(st.syncs, 1u);
    EXPECT_EQ(st.completions, 1u);
    EXPECT_FALSE(st.broken);
  }
  std::vector<std::string> lines = read_lines(p[0]);
  close(p[0]);
  ASSERT_EQ(lines.size(), 5u);
  // Launch lines come before the completion of the same kernel, times shifted by the clocks' offset; the
  // synchronize keeps its place among the launches.
  std::int64_t cpu = 0, corr = 0;
  char name[64] = {};
  ASSERT_EQ(std::sscanf(lines[0].c_str(), "L %ld %ld %63[^\n]", &cpu, &corr, name), 3) << lines[0];
  EXPECT_EQ(corr, 1);
  EXPECT_STREQ(name, "gelu(float*)");
  EXPECT_NEAR(static_cast<double>(cpu - t0), static_cast<double>(kSkew), 1000.0);
  EXPECT_TRUE(lines[1].starts_with("L ")) << lines[1];
  EXPECT_TRUE(lines[1].ends_with(" 2 cudaGraphLaunch graph=5")) << lines[1];
  lines.erase(lines.begin() + 1);
  EXPECT_TRUE(lines[1].starts_with("L ")) << lines[1];
  EXPECT_TRUE(lines[1].ends_with(" 3 ampere_sgemm_128x64_nn")) << lines[1];
  std::int64_t sc = 0, enter = 0, exit = 0;
  ASSERT_EQ(std::sscanf(lines[2].c_str(), "S %ld %ld %ld", &sc, &enter, &exit), 3) << lines[2];
  EXPECT_EQ(sc, 4);
  EXPECT_EQ(enter - cpu, 30);
  EXPECT_EQ(exit - enter, 4970);
  std::int64_t c = 0, start = 0, end = 0, stream = 0, device = -1;
  ASSERT_EQ(std::sscanf(lines[3].c_str(), "C %ld %ld %ld %ld %ld", &c, &start, &end, &stream, &device), 5);
  EXPECT_EQ(c, 1);
  EXPECT_EQ(end - start, 2000);
  EXPECT_EQ(start - cpu, 1000);  // both shifted by the same offset
  EXPECT_EQ(stream, 7);
  EXPECT_EQ(device, 0);
}

// gearshift gone (the read end closed): no SIGPIPE kills the program, the feed turns itself off.
TEST(RuntimeFeed, NamesAGraphsKernelsOnceAndEachOfItsCompletions) {
  // A graph launch has one L line; its kernels' C lines carry their own name's id, each name sent once (N line,
  // demangled) before the first C line that uses it.
  int p[2];
  ASSERT_EQ(pipe(p), 0);
  std::int64_t t0 = cupti_clock();
  {
    RuntimeFeed feed(p[1], &cupti_clock, 200'000);
    feed.on_launch(LaunchEvent{2, LaunchApi::graph, t0, nullptr, -1, 5});
    std::string gelu = "_Z4geluPf";  // a buffer of its own: the record's name need not outlive the call
    feed.on_kernel_complete(2, t0 + 100, t0 + 200, 7, 0, "sm90_gemm_bf16");
    feed.on_kernel_complete(2, t0 + 200, t0 + 300, 7, 0, gelu);
    gelu = "overwritten";
    feed.on_kernel_complete(2, t0 + 300, t0 + 400, 7, 0, "sm90_gemm_bf16");
    feed.on_kernel_complete(2, t0 + 400, t0 + 500, 7, 0, "_Z4geluPf");
    feed.stop();
    EXPECT_EQ(feed.stats().completions, 4u);
  }
  std::vector<std::string> lines = read_lines(p[0]);
  close(p[0]);
  ASSERT_EQ(lines.size(), 7u);
  EXPECT_TRUE(lines[0].ends_with(" 2 cudaGraphLaunch graph=5")) << lines[0];
  EXPECT_EQ(lines[1], "N 0 sm90_gemm_bf16");
  EXPECT_EQ(lines[2], "N 1 gelu(float*)");
  const char* ids[] = {" 7 0 0", " 7 0 1", " 7 0 0", " 7 0 1"};
  for (int i = 0; i < 4; ++i) {
    EXPECT_TRUE(lines[3 + i].starts_with("C 2 ")) << lines[3 + i];
    EXPECT_TRUE(lines[3 + i].ends_with(ids[i])) << lines[3 + i];
  }
}

TEST(RuntimeFeed, WritesCopiesAndMemsetsWithTheirLabelsInMonotonicTime) {
  // Y lines: the template needs a step's copies (taken as idle, they were read as memory/uncore power).
  int p[2];
  ASSERT_EQ(pipe(p), 0);
  std::int64_t t0 = cupti_clock();
  {
    RuntimeFeed feed(p[1], &cupti_clock, 200'000);
    std::string label = "Memcpy DtoD (Device -> Device)";  // the decoder's scratch buffer: reused per record
    feed.on_copy_complete(21, t0 + 100, t0 + 900, 7, 1, 1 << 20, false, label);
    label = "Memset (Device)";
    feed.on_copy_complete(22, t0 + 900, t0 + 950, 7, 1, 4096, true, label);
    label = "Memcpy DtoD (Device -> Device)";
    feed.on_copy_complete(23, t0 + 950, t0 + 1950, 8, 1, 2 << 20, false, label);
    feed.stop();
    EXPECT_EQ(feed.stats().copies, 3u);
    EXPECT_EQ(feed.stats().completions, 0u);
  }
  std::vector<std::string> lines = read_lines(p[0]);
  close(p[0]);
  ASSERT_EQ(lines.size(), 3u);
  std::int64_t corr = 0, start = 0, end = 0, stream = 0, device = 0, bytes = 0;
  char kind = 0;
  char label[64] = {};
  ASSERT_EQ(std::sscanf(lines[0].c_str(), "Y %ld %ld %ld %ld %ld %ld %c %63[^\n]", &corr, &start, &end, &stream,
                        &device, &bytes, &kind, label),
            8)
      << lines[0];
  EXPECT_EQ(corr, 21);
  EXPECT_NEAR(static_cast<double>(start - t0), static_cast<double>(kSkew + 100), 1000.0);
  EXPECT_EQ(end - start, 800);
  EXPECT_EQ(stream, 7);
  EXPECT_EQ(device, 1);
  EXPECT_EQ(bytes, 1 << 20);
  EXPECT_EQ(kind, 'c');
  EXPECT_STREQ(label, "Memcpy DtoD (Device -> Device)");
  EXPECT_TRUE(lines[1].ends_with(" 4096 s Memset (Device)")) << lines[1];
  EXPECT_TRUE(lines[2].ends_with(" c Memcpy DtoD (Device -> Device)")) << lines[2];
}

TEST(RuntimeFeed, ClosedPipeTurnsTheFeedOffWithoutKillingTheProgram) {
  int p[2];
  ASSERT_EQ(pipe(p), 0);
  close(p[0]);
  RuntimeFeed feed(p[1], &cupti_clock, 100'000);
  for (std::uint32_t i = 1; i <= 100; ++i) feed.on_launch(LaunchEvent{i, LaunchApi::kernel, cupti_clock(), "k"});
  feed.stop();
  FeedStats st = feed.stats();
  EXPECT_TRUE(st.broken);
  EXPECT_EQ(st.launches, 100u);  // formatted, then the write failed
}

TEST(RuntimeFeed, CountsLaunchesDroppedWhenTheQueueIsFull) {
  int p[2];
  ASSERT_EQ(pipe(p), 0);
  // A period of a minute: the writer does not drain before stop(); 8 slots take 8 of 20 launches.
  RuntimeFeed feed(p[1], &cupti_clock, 60'000'000'000, 8);
  for (std::uint32_t i = 1; i <= 20; ++i) feed.on_launch(LaunchEvent{i, LaunchApi::kernel, cupti_clock(), "k"});
  feed.stop();
  EXPECT_EQ(feed.stats().dropped_launches, 12u);
  EXPECT_EQ(feed.stats().launches, 8u);
  EXPECT_EQ(read_lines(p[0]).size(), 8u);
  close(p[0]);
}

}  // namespace
}  // namespace gearshift::cupti
