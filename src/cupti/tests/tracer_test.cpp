#include <gtest/gtest.h>

#include <filesystem>
#include <string>

#include "cupti/tracer.hpp"
#include "synthetic.hpp"
#include "trace/error.hpp"
#include "trace/gearshift_format.hpp"
#include "trace/iteration.hpp"

using namespace gearshift;
using namespace gearshift::cupti;

namespace {

std::string temp_path(const std::string& name) {
  return (std::filesystem::path(::testing::TempDir()) / ("gearshift_cupti_" + name)).string();
}

TracerConfig config_for(const std::string& path) {
  TracerConfig c;
  c.output = path;
  return c;
}

void feed(Tracer& t, const synthetic::SyntheticRun& run) {
  for (const auto& m : run.markers)
    if (m.phase == MarkerActivity::Phase::start) t.add(m);
  for (const auto& op : run.ops) t.add(op);
  for (const auto& m : run.markers)
    if (m.phase == MarkerActivity::Phase::end) t.add(m);
}

}  // namespace

TEST(Tracer, WritesCorrelatedDemangledOpsWithClocks) {
  std::string path = temp_path("basic.jsonl.gz");
  LaunchTable table;
  auto run = synthetic::make_run(3, &table);
  {
    Tracer t(config_for(path), &table, "CUPTI", "NVIDIA H200", R"({"model":"synthetic"})");
    // Clocks: 1980 MHz during step 0, 1830 MHz from step 1 on.
    t.add(trace::DeviceSample{0, 1'000'000'000, 1980, 3201, 450'000});
    t.add(trace::DeviceSample{0, 1'010'000'000, 1830, 3201, 690'000});
    feed(t, run);
    auto st = t.stats();
    EXPECT_EQ(st.kernels, 12u);
    EXPECT_EQ(st.memcpys, 3u);
    EXPECT_EQ(st.uncorrelated, 0u);
    EXPECT_EQ(st.step_ranges, 3u);
    EXPECT_FALSE(t.stop_reason().has_value());
    t.finish(true, "");
    EXPECT_TRUE(t.ok());
  }
  trace::Trace tr = trace::read_gearshift_trace(path);
  EXPECT_TRUE(tr.complete);
  EXPECT_EQ(tr.gpu_name, "NVIDIA H200");
  ASSERT_EQ(tr.ops.size(), 15u);
  EXPECT_EQ(tr.kernel_count(), 12u);
  EXPECT_EQ(tr.name_of(tr.ops[0]), "gemm_bf16(float const*, float const*, float*, int)");
  EXPECT_EQ(tr.name_of(tr.ops[1]), "layernorm(float*, int)");
  EXPECT_EQ(tr.ops[0].sm_clock_mhz, 1980);
  EXPECT_EQ(tr.ops[0].mem_clock_mhz, 3201);
  EXPECT_EQ(tr.ops.back().sm_clock_mhz, 1830);
  EXPECT_EQ(tr.ops[0].correlation, 1);
  EXPECT_EQ(tr.ops[0].grid[0], 132);
  EXPECT_EQ(tr.ops[0].shared_memory_bytes, 4096);
  EXPECT_EQ(tr.ops[4].bytes, 1 << 20);
  ASSERT_EQ(tr.markers.size(), 3u);
  EXPECT_EQ(tr.markers[1].name, "gearshift.step");
  EXPECT_EQ(tr.markers[1].start_ns, 1'010'000'000);
  EXPECT_EQ(tr.markers[1].duration_ns, 9'000'000);
  ASSERT_EQ(tr.samples.size(), 2u);
  EXPECT_EQ(tr.samples[1].power_mw, 690'000);
  // The written file is good input for iteration detection (by the step ranges).
  auto a = trace::detect_iterations(tr);
  EXPECT_EQ(a.method, "step markers");
  EXPECT_EQ(a.iterations.size(), 3u);
  EXPECT_EQ(a.tmpl.kernels, 4u);
}

// The job's synchronizes (from the API callbacks) go into the trace as "y" records, and the trailer says the
// trace holds them all only when every synchronize callback was on.
TEST(Tracer, WritesTheJobsSynchronizes) {
  std::string path = temp_path("syncs.jsonl.gz");
  LaunchTable table;
  auto run = synthetic::make_run(2, &table);
  for (bool all : {true, false}) {
    {
      Tracer t(config_for(path), &table, "CUPTI", "", "{}");
      t.set_syncs_recorded(all);
      feed(t, run);
      trace::SyncRecord y;
      y.scope = trace::SyncRecord::Scope::stream;
      y.correlation = 1000;
      y.enter_ns = 1'020'000'000;
      y.duration_ns = 250'000;
      t.add(y);
      y.scope = trace::SyncRecord::Scope::device;
      y.correlation = 900;
      y.enter_ns = 1'010'000'000;
      t.add(y);
      t.finish(true, "");
      EXPECT_EQ(t.stats().syncs, 2u);
      y.enter_ns = 1'030'000'000;
      t.add(y);  // after the end: not written
    }
    trace::Trace tr = trace::read_gearshift_trace(path);
    EXPECT_TRUE(tr.complete);
    EXPECT_EQ(tr.syncs_recorded, all);
    ASSERT_EQ(tr.syncs.size(), 2u);
    EXPECT_EQ(tr.syncs[0].scope, trace::SyncRecord::Scope::device);
    EXPECT_EQ(tr.syncs[0].correlation, 900);
    EXPECT_EQ(tr.syncs[1].scope, trace::SyncRecord::Scope::stream);
    EXPECT_EQ(tr.syncs[1].exit_ns(), 1'020'250'000);
    std::filesystem::remove(path);
  }
}

TEST(Tracer, CountsUncorrelatedAndGroupsGraphKernels) {
  std::string path = temp_path("graph.jsonl.gz");
  LaunchTable table;
  table.record(100, LaunchApi::graph);
  TracerConfig c = config_for(path);
  c.all_ranges = true;
  Tracer t(c, &table, "CUPTI", "", "{}");
  GpuActivity a;
  a.name = "_Z4geluPf";
  a.correlation = 100;
  a.graph_id = 5;
  a.start_ns = 2000;
  a.end_ns = 3000;
  t.add(a);
  a.start_ns = 3500;
  a.end_ns = 4000;
  t.add(a);
  a.correlation = 200;  // launch never seen
  a.graph_id = 0;
  t.add(a);
  auto st = t.stats();
  EXPECT_EQ(st.graph_kernels, 2u);
  EXPECT_EQ(st.uncorrelated, 1u);
  t.finish(true, "");
  trace::Trace tr = trace::read_gearshift_trace(path);
  ASSERT_EQ(tr.markers.size(), 1u);
  EXPECT_EQ(tr.markers[0].name, "cuda.graph_launch#5");
  EXPECT_EQ(tr.markers[0].start_ns, 2000);
  EXPECT_EQ(tr.markers[0].duration_ns, 2000);
  EXPECT_TRUE(tr.markers[0].on_gpu);
}

TEST(Tracer, KeepsOnlyStepRangesUnlessAskedForAll) {
  for (bool all : {false, true}) {
    std::string path = temp_path(all ? "ranges_all.jsonl.gz" : "ranges_steps.jsonl.gz");
    TracerConfig c = config_for(path);
    c.all_ranges = all;
    Tracer t(c, nullptr, "CUPTI", "", "{}");
    t.add(MarkerActivity{MarkerActivity::Phase::start, 1, 100, "cub::DeviceRadixSort"});
    t.add(MarkerActivity{MarkerActivity::Phase::start, 2, 150, "ProfilerStep#4"});
    t.add(MarkerActivity{MarkerActivity::Phase::end, 1, 200, ""});
    t.add(MarkerActivity{MarkerActivity::Phase::end, 2, 900, ""});
    t.add(MarkerActivity{MarkerActivity::Phase::instant, 3, 300, "checkpoint"});
    EXPECT_EQ(t.stats().ranges, 2u);
    EXPECT_EQ(t.stats().step_ranges, 1u);
    t.finish(true, "");
    auto tr = trace::read_gearshift_trace(path);
    ASSERT_EQ(tr.markers.size(), all ? 3u : 1u);
    EXPECT_EQ(tr.markers[all ? 1 : 0].name, "ProfilerStep#4");
    EXPECT_EQ(tr.markers[all ? 1 : 0].duration_ns, 750);
  }
}

TEST(Tracer, StopsAfterRequestedStepsAndIgnoresLateRecords) {
  std::string path = temp_path("steps.jsonl.gz");
  TracerConfig c = config_for(path);
  c.steps = 2;
  Tracer t(c, nullptr, "CUPTI", "", "{}");
  auto run = synthetic::make_run(3, nullptr);
  feed(t, run);
  ASSERT_TRUE(t.stop_reason().has_value());
  EXPECT_EQ(*t.stop_reason(), "traced 2 steps");
  t.finish(true, *t.stop_reason());
  t.add(run.ops[0]);
  EXPECT_EQ(t.stats().after_stop, 1u);
  EXPECT_TRUE(trace::read_gearshift_trace(path).complete);
}

TEST(Tracer, DroppedRecordsMakeTheTraceIncomplete) {
  std::string path = temp_path("dropped.jsonl.gz");
  Tracer t(config_for(path), nullptr, "CUPTI", "", "{}");
  feed(t, synthetic::make_run(2, nullptr));
  t.add_dropped(17, 1);
  t.finish(true, "program exited");
  // 17 of 29 records dropped: above the reader's limit (trace::kMaxDroppedRecordShare, 1 %), so refused.
  EXPECT_THROW(trace::read_gearshift_trace(path), trace::TraceError);

  std::string few = temp_path("dropped_few.jsonl.gz");
  Tracer t2(config_for(few), nullptr, "CUPTI", "", "{}");
  feed(t2, synthetic::make_run(50, nullptr));
  t2.add_dropped(1, 1);  // one record and one buffer request: read, but incomplete and counted
  t2.finish(true, "program exited");
  trace::Trace tr = trace::read_gearshift_trace(few);
  EXPECT_FALSE(tr.complete);
  EXPECT_EQ(tr.health.dropped_records, 1u);
  EXPECT_EQ(tr.kernel_count(), 200u);
}

TEST(Tracer, RecordCapRequestsStop) {
  TracerConfig c = config_for(temp_path("cap.jsonl.gz"));
  c.max_records = 5;
  Tracer t(c, nullptr, "CUPTI", "", "{}");
  feed(t, synthetic::make_run(2, nullptr));
  ASSERT_TRUE(t.stop_reason().has_value());
  EXPECT_NE(t.stop_reason()->find("record cap"), std::string::npos);
}

TEST(Tracer, DiskFullStopsTracingWithAnError) {
  if (!std::filesystem::exists("/dev/full")) GTEST_SKIP() << "no /dev/full";
  Tracer t(config_for("/dev/full"), nullptr, "CUPTI", "", "{}");
  for (int i = 0; i < 200 && t.ok(); ++i) feed(t, synthetic::make_run(50, nullptr, i * 1'000'000'000LL));
  EXPECT_FALSE(t.ok());
  ASSERT_TRUE(t.stop_reason().has_value());
  EXPECT_NE(t.stop_reason()->find("cannot write"), std::string::npos);
  t.finish(true, "");  // must not throw or crash
  EXPECT_FALSE(t.error().empty());
}

TEST(Tracer, UnwritablePathIsReportedNotThrown) {
  Tracer t(config_for("/nonexistent-dir/x.jsonl.gz"), nullptr, "CUPTI", "", "{}");
  EXPECT_FALSE(t.ok());
  EXPECT_NE(t.error().find("cannot open"), std::string::npos);
}

TEST(Tracer, LabelsAndDemangling) {
  EXPECT_EQ(memcpy_label(1, 1, 3), "Memcpy HtoD (Pageable -> Device)");
  EXPECT_EQ(memcpy_label(8, 3, 3), "Memcpy DtoD (Device -> Device)");
  EXPECT_EQ(memset_label(3), "Memset (Device)");
  EXPECT_EQ(memcpy_label(99, -1, 3), "Memcpy Unknown (Unknown -> Device)");
  EXPECT_EQ(demangle("_Z4geluPf"), "gelu(float*)");
  EXPECT_EQ(demangle("void at::native::foo<float>(int)"), "void at::native::foo<float>(int)");
  EXPECT_EQ(demangle("_Zbroken"), "_Zbroken");
}
