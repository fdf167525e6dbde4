// The template's CPU side (trace/cpu_timeline.hpp): launch offsets and the step's synchronizes.
#include "trace/cpu_timeline.hpp"

#include <gtest/gtest.h>

#include "step_builder.hpp"
#include "trace/gearshift_format.hpp"

namespace gearshift::trace {
namespace {

// `steps` steps of 6 kernels, each launched 8 µs before it starts; one device synchronize per step after the
// 3rd kernel's launch, waiting for it (returns 4 µs after its end); `extra_sync_in` gets a second one.
Trace with_syncs(int steps, int extra_sync_in = -1) {
  Trace t;
  t.names = {"embed", "gemm", "norm", "loss", "bgemm", "adam"};
  std::int64_t now = 1'000'000;
  for (int s = 0; s < steps; ++s) {
    now += 200'000;  // the CPU prepares the next batch
    for (std::size_t i = 0; i < t.names.size(); ++i) {
      OpRecord r;
      r.name_id = static_cast<std::uint32_t>(i);
      r.start_ns = now;
      r.duration_ns = 10'000 + 1000 * static_cast<std::int64_t>(i);
      r.stream = 7;
      r.launch_ns = now - 8'000;
      r.correlation = static_cast<std::int64_t>(t.ops.size());
      t.ops.push_back(r);
      now += r.duration_ns + 2'000;
      if (i == 2) {
        SyncRecord y;
        y.enter_ns = r.launch_ns + 1'000;
        y.duration_ns = r.end_ns() + 4'000 - y.enter_ns;
        t.syncs.push_back(y);
        if (s == extra_sync_in) {
          SyncRecord z = y;
          z.enter_ns = y.exit_ns() + 500;
          z.duration_ns = 1'000;
          t.syncs.push_back(z);
        }
        now += 10'000;  // the next launch comes after the synchronize returned
      }
    }
  }
  t.syncs_recorded = true;
  return t;
}

TEST(CpuTimeline, LaunchOffsetsAndTheStepsSynchronizes) {
  Trace t = with_syncs(5);
  auto a = detect_iterations(t);
  ASSERT_EQ(a.tmpl.ops.size(), 6u);
  for (const auto& o : a.tmpl.ops) {
    EXPECT_TRUE(o.launch_known);
    EXPECT_NEAR(o.start_offset_ns - o.launch_offset_ns, 8'000, 1e-6);
  }
  ASSERT_TRUE(a.tmpl.syncs_known) << a.tmpl.cpu_note;
  ASSERT_EQ(a.tmpl.syncs.size(), 1u);
  const auto& y = a.tmpl.syncs[0];
  EXPECT_EQ(y.scope, SyncRecord::Scope::device);
  EXPECT_NEAR(y.enter_offset_ns, a.tmpl.ops[2].launch_offset_ns + 1'000, 1e-6);
  EXPECT_NEAR(y.enter_offset_ns + y.duration_ns, a.tmpl.ops[2].start_offset_ns + a.tmpl.ops[2].duration_ns + 4'000, 1e-6);
}

TEST(CpuTimeline, StepsThatDisagreeKeepTheCommonCountOrNone) {
  // One step of five calls a second synchronize: the other four agree, so one per step is kept.
  auto a = detect_iterations(with_syncs(5, 2));
  EXPECT_TRUE(a.tmpl.syncs_known);
  EXPECT_EQ(a.tmpl.syncs.size(), 1u);
  // Not recorded: the CPU is taken never to wait, and the note says so.
  Trace t = with_syncs(5);
  t.syncs_recorded = false;
  auto b = detect_iterations(t);
  EXPECT_FALSE(b.tmpl.syncs_known);
  EXPECT_NE(b.tmpl.cpu_note.find("does not record"), std::string::npos) << b.tmpl.cpu_note;
  // No launch events at all.
  Trace bare = with_syncs(5);
  for (auto& r : bare.ops) r.launch_ns = -1;
  auto c = detect_iterations(bare);
  EXPECT_FALSE(c.tmpl.ops[0].launch_known);
  EXPECT_NE(c.tmpl.cpu_note.find("no launch events"), std::string::npos) << c.tmpl.cpu_note;
}

TEST(CpuTimeline, AShippedTorchProfilerTraceWithRuntimeEvents) {
  Trace t = import_trace(std::string(GEARSHIFT_DATA_DIR) + "/step_traces/accum4_gpt2s.json.gz");
  auto a = detect_iterations(t);
  for (const auto& o : a.tmpl.ops) EXPECT_TRUE(o.launch_known);
  ASSERT_TRUE(a.tmpl.syncs_known) << a.tmpl.cpu_note;
  EXPECT_EQ(a.tmpl.syncs.size(), 4u);
}

// Steps of unequal length (a MoE's routing): each layer's synchronize is placed after the routing copy's
// laid-out launch and returns its return latency after the laid-out end of the work before it. Before, such
// steps placed none and the CPU was taken never to wait.
TEST(CpuTimeline, StepsOfUnequalLengthPlaceEachSynchronizeByTheLaunchBeforeIt) {
  test_support::RoutedCpuBuilder b;
  for (int s = 0; s < 12; ++s) b.step();
  auto a = detect_iterations(b.t);
  ASSERT_EQ(a.method, "optimizer updates");
  ASSERT_TRUE(a.tmpl.syncs_known) << a.tmpl.cpu_note;
  ASSERT_EQ(a.tmpl.syncs.size(), 6u) << a.tmpl.cpu_note;  // one per layer
  EXPECT_NE(a.tmpl.cpu_note.find("placed by the main-stream launch before each"), std::string::npos) << a.tmpl.cpu_note;
  const auto copy = std::find(b.t.names.begin(), b.t.names.end(), "Memcpy DtoH (Device -> Pinned)") - b.t.names.begin();
  std::vector<const TemplateOp*> copies;
  for (const auto& o : a.tmpl.ops)
    if (o.name_id == static_cast<std::uint32_t>(copy)) copies.push_back(&o);
  ASSERT_EQ(copies.size(), 6u);
  for (std::size_t l = 0; l < 6; ++l) {
    const TemplateSync& y = a.tmpl.syncs[l];
    const TemplateOp& c = *copies[l];
    EXPECT_GE(y.samples, 7u);
    EXPECT_NEAR(y.enter_offset_ns, c.launch_offset_ns + test_support::RoutedCpuBuilder::kLaunchEvery, 1.0) << l;
    // It waited in every step: it returns 3 µs after the copy, the last work launched before it, ends.
    EXPECT_NEAR(y.enter_offset_ns + y.duration_ns, c.start_offset_ns + c.duration_ns + test_support::RoutedCpuBuilder::kReturn,
                1.0)
        << l;
  }
  // Not recorded: none placed, and the note says so.
  b.t.syncs_recorded = false;
  auto none = detect_iterations(b.t);
  EXPECT_FALSE(none.tmpl.syncs_known);
  EXPECT_NE(none.tmpl.cpu_note.find("does not record"), std::string::npos) << none.tmpl.cpu_note;
}

// A synchronize that only some steps call (here: one step in four) is left out, and the note counts it.
TEST(CpuTimeline, ASynchronizeOfFewStepsIsLeftOutOfUnequalSteps) {
  test_support::RoutedCpuBuilder b;
  for (int s = 0; s < 12; ++s) {
    b.step();
    if (s % 4 == 1) b.sync();  // after the update, before the next batch: a logging step's .item()
  }
  auto a = detect_iterations(b.t);
  ASSERT_TRUE(a.tmpl.syncs_known) << a.tmpl.cpu_note;
  EXPECT_EQ(a.tmpl.syncs.size(), 6u);
  EXPECT_NE(a.tmpl.cpu_note.find("fewer than half the steps call them"), std::string::npos) << a.tmpl.cpu_note;
}

}  // namespace
}  // namespace gearshift::trace
