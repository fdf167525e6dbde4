#include "trace/iteration.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>

#include "trace/gearshift_format.hpp"
#include "test_paths.hpp"

namespace gearshift::trace {
namespace {

// `steps` repeats of a kernel sequence on one stream: `step_gap_ns` idle before each step and gap(s, i) ns more
// before op i of step s; op i lasts 1000 + 100 i ns and is followed by 500 ns of idle.
template <typename Gap>
Trace steps_with_gaps(int steps, const std::vector<std::string>& seq, Gap gap, std::int64_t step_gap_ns = 50'000) {
  Trace t;
  t.names = seq;
  std::int64_t now = 1'000'000;
  for (int s = 0; s < steps; ++s) {
    now += step_gap_ns;
    for (std::size_t i = 0; i < seq.size(); ++i) {
      now += gap(s, i);
      OpRecord r;
      r.name_id = static_cast<std::uint32_t>(i);
      r.start_ns = now;
      r.duration_ns = 1000 + 100 * static_cast<std::int64_t>(i);
      r.stream = 7;
      t.ops.push_back(r);
      now += r.duration_ns + 500;
    }
  }
  return t;
}

// A synthetic trace: `steps` repeats of a kernel sequence with a gap between steps.
Trace synthetic(int steps, const std::vector<std::string>& seq, std::int64_t gap_ns = 50'000) {
  return steps_with_gaps(steps, seq, [](int, std::size_t) -> std::int64_t { return 0; }, gap_ns);
}

TEST(Iteration, FindsPeriodAndBoundariesOfARepeatedSequence) {
  // A layer pattern repeats inside the step; the step (not the layer) must be found.
  std::vector<std::string> seq = {"embed", "gemm", "norm", "gemm", "norm", "gemm", "norm", "loss", "bgemm", "adam"};
  Trace t = synthetic(4, seq);
  auto a = detect_iterations(t);
  EXPECT_EQ(a.method, "kernel-stream period");
  EXPECT_EQ(a.period_ops, seq.size());
  ASSERT_EQ(a.iterations.size(), 4u);
  EXPECT_EQ(a.regular_count(), 4u);
  EXPECT_EQ(a.tmpl.ops.size(), seq.size());
  EXPECT_EQ(t.names[a.tmpl.ops.front().name_id], "embed");
  EXPECT_DOUBLE_EQ(a.tmpl.ops[3].duration_ns, 1300);
  EXPECT_NEAR(a.confidence, 1.0, 1e-12);
  // Period: sum of durations + gaps + the step gap.
  double expected = 50'000;
  for (std::size_t i = 0; i < seq.size(); ++i) expected += 1000 + 100 * static_cast<double>(i) + 500;
  EXPECT_DOUBLE_EQ(a.tmpl.period_ns, expected);
}

TEST(Iteration, ToleratesAnInsertedKernelInOneStep) {
  std::vector<std::string> seq = {"a", "b", "c", "d", "e", "f", "g", "h", "i", "j", "k", "adam"};
  Trace t = synthetic(5, seq);
  // Insert an extra kernel in step 3 (e.g. a one-off cudaMemset).
  t.names.push_back("extra");
  OpRecord extra = t.ops[2 * seq.size() + 5];
  extra.name_id = static_cast<std::uint32_t>(t.names.size() - 1);
  extra.start_ns += 1;
  t.ops.insert(t.ops.begin() + static_cast<std::ptrdiff_t>(2 * seq.size() + 6), extra);
  auto a = detect_iterations(t);
  EXPECT_EQ(a.period_ops, seq.size());
  EXPECT_EQ(a.iterations.size(), 5u);
  EXPECT_EQ(a.regular_count(), 5u);  // 12 of 12 template ops still matched
  EXPECT_EQ(a.tmpl.ops.size(), seq.size());
}

TEST(Iteration, LeavesOutOfTheTemplateWorkAnotherStreamDoesInOneStepOnly) {
  // A memset on a side stream in the first step only (measured: a gradient-checkpointing job's warm-up step):
  // kept, it was simulated in every step at its one offset and tripled the modelled step.
  std::vector<std::string> seq = {"a", "b", "c", "d", "e", "f", "g", "h", "i", "j", "k", "adam"};
  Trace t = synthetic(6, seq);
  t.names.push_back("Memset (Device)");
  OpRecord side = t.ops[4];
  side.name_id = static_cast<std::uint32_t>(t.names.size() - 1);
  side.kind = OpKind::memset;
  side.stream = 13;
  side.start_ns += 10;
  side.duration_ns = 100;
  t.ops.insert(t.ops.begin() + 5, side);
  // The same on another stream in two of six steps: still less than half of the steps.
  for (int step : {2, 4}) {
    OpRecord again = t.ops[static_cast<std::size_t>(step) * seq.size() + 1 + 3];
    again.name_id = side.name_id;
    again.kind = OpKind::memset;
    again.stream = 29;
    again.start_ns += 10;
    again.duration_ns = 100;
    t.ops.push_back(again);
  }
  std::stable_sort(t.ops.begin(), t.ops.end(), [](const OpRecord& x, const OpRecord& y) { return x.start_ns < y.start_ns; });
  auto a = detect_iterations(t);
  ASSERT_EQ(a.iterations.size(), 6u);
  EXPECT_EQ(a.tmpl.ops.size(), seq.size());
  for (const auto& op : a.tmpl.ops) EXPECT_EQ(op.stream, 7) << t.names[op.name_id];

  // Work a side stream does in every step stays in the template.
  Trace every = synthetic(6, seq);
  every.names.push_back("Memset (Device)");
  const std::size_t n = every.ops.size();
  for (std::size_t k = 0; k < 6; ++k) {
    OpRecord s2 = every.ops[k * seq.size() + 2];
    s2.name_id = static_cast<std::uint32_t>(every.names.size() - 1);
    s2.kind = OpKind::memset;
    s2.stream = 13;
    s2.start_ns += 10;
    every.ops.push_back(s2);
  }
  ASSERT_EQ(every.ops.size(), n + 6);
  std::stable_sort(every.ops.begin(), every.ops.end(),
                   [](const OpRecord& x, const OpRecord& y) { return x.start_ns < y.start_ns; });
  auto b = detect_iterations(every);
  EXPECT_EQ(b.tmpl.ops.size(), seq.size() + 1);
}

TEST(Iteration, AWarmUpStepAndAStalledStepStayOutOfTheTemplatesTiming) {
  // Step 1 is a warm-up (10 us idle before every op: 6x as long), step 6 stalls 20 us in its middle (a
  // synchronize for logging: 1.8x as long). Before, their offsets went into a mean: the template's last position
  // started 10.8 us late against every typical step and its period was 11.8 us too long (measured on an H200
  // trace of gradient accumulation: a 1.5 s warm-up step among 180 ms ones put 14 ms into the period).
  const std::vector<std::string> seq = {"embed", "gemm", "norm", "gemm", "norm", "gemm", "norm", "loss", "bgemm",
                                        "bnorm", "bgemm", "adam"};
  Trace t = steps_with_gaps(12, seq, [](int s, std::size_t i) -> std::int64_t {
    if (s == 0) return 10'000;
    if (s == 5 && i == 6) return 20'000;
    return 0;
  });
  auto a = detect_iterations(t);
  ASSERT_EQ(a.iterations.size(), 12u);
  ASSERT_EQ(a.regular_count(), 12u);
  for (std::size_t k = 0; k < 12; ++k) EXPECT_EQ(a.iterations[k].typical_timing, k != 0 && k != 5) << k;
  double typical_period = 50'000, last_offset = 0;
  for (std::size_t i = 0; i < seq.size(); ++i) {
    if (i + 1 == seq.size()) last_offset = typical_period - 50'000;
    typical_period += 1000 + 100 * static_cast<double>(i) + 500;
  }
  EXPECT_NEAR(a.tmpl.period_ns, typical_period, 1.0);
  const TemplateOp& last = *std::max_element(a.tmpl.ops.begin(), a.tmpl.ops.end(),
                                             [](const TemplateOp& x, const TemplateOp& y) { return x.start_offset_ns < y.start_offset_ns; });
  EXPECT_NEAR(last.start_offset_ns, last_offset, 1.0);
  EXPECT_EQ(last.samples, 12u);  // durations still count every step
  bool said = false;
  for (const auto& l : a.evidence.lines) said |= l.find("2 of 12 steps ran with atypical timing (step 1, 6") != std::string::npos;
  EXPECT_TRUE(said);
}

TEST(Iteration, StepsThatVaryByAFewPercentKeepTheirTiming) {
  // A job whose steps differ by up to 4 % (an input pipeline, a busy CPU): that is its timing, not an outlier.
  const std::vector<std::string> seq = {"embed", "gemm", "norm", "gemm", "norm", "gemm", "norm", "loss", "bgemm",
                                        "bnorm", "bgemm", "adam"};
  Trace t = steps_with_gaps(12, seq, [](int s, std::size_t i) -> std::int64_t {
    return i == 4 ? 1'000 * static_cast<std::int64_t>((s * 7) % 5) : 0;  // 0-4 us in a 24 us step
  });
  auto a = detect_iterations(t);
  ASSERT_EQ(a.regular_count(), 12u);
  for (const auto& it : a.iterations) EXPECT_TRUE(it.typical_timing);
  for (const auto& l : a.evidence.lines) EXPECT_EQ(l.find("atypical"), std::string::npos) << l;
}

TEST(Iteration, RefusesATraceWithoutRepeats) {
  Trace t = synthetic(1, {"a", "b", "c", "d", "e", "f"});
  EXPECT_THROW(detect_iterations(t), NoIterationError);
  Trace empty;
  EXPECT_THROW(detect_iterations(empty), NoIterationError);
}

TEST(Iteration, UsesStepMarkersWhenPresent) {
  std::vector<std::string> seq = {"a", "b", "c", "d"};
  Trace t = synthetic(3, seq);
  for (auto& r : t.ops) r.launch_ns = r.start_ns - 5000;  // CPU launches run ahead of the GPU
  // Markers cut the steps after the second op: with launch times, the markers (not the period) decide.
  for (int s = 0; s < 3; ++s) {
    const auto& first = t.ops[static_cast<std::size_t>(s) * seq.size() + 2];
    t.markers.push_back(Marker{"ProfilerStep#" + std::to_string(s), first.launch_ns - 10, 9000, false});
  }
  auto a = detect_iterations(t);
  EXPECT_EQ(a.method, "step markers");
  ASSERT_EQ(a.iterations.size(), 3u);
  EXPECT_EQ(a.regular_count(), 2u);  // the last marker's step holds only "c d": the trace ends there
  EXPECT_EQ(a.period_ops, 4u);
  EXPECT_EQ(t.names[a.tmpl.ops.front().name_id], "c");
  // Without launch times the same markers are ignored.
  for (auto& r : t.ops) r.launch_ns = -1;
  EXPECT_EQ(detect_iterations(t).method, "kernel-stream period");
}

struct Shipped {
  const char* file;
  std::size_t kernels_per_step;
};

TEST(Iteration, ShippedH200TracesHoldThreeStepsOfKnownSize) {
  if (!test::have_shared()) GTEST_SKIP() << "../shared/data absent in this checkout";
  // docs/design.md: GPT-3 XL has 1532 kernels per step.
  for (auto [file, kernels] : {Shipped{"data/traces/gpt3xl_h200_trace.json.gz", 1532}}) {
    Trace t = import_trace(test::shared_path(file));
    auto a = detect_iterations(t);
    EXPECT_EQ(a.iterations.size(), 3u) << file;
    EXPECT_EQ(a.tmpl.kernels, kernels) << file;
    EXPECT_GT(a.confidence, 0.95) << file;
    // Period close to the measured 0.2026 s/step (traced steps run slightly slower under the profiler).
    EXPECT_NEAR(a.tmpl.period_ns * 1e-9, 0.2026, 0.02) << file;
  }
}

TEST(Iteration, EmbeddedDemoTraceIsTheSharedOne) {
  Trace t = import_trace(test::data_path("traces/gpt3xl_h200_trace.json.gz"));
  auto a = detect_iterations(t);
  EXPECT_EQ(a.iterations.size(), 3u);
  EXPECT_EQ(a.tmpl.kernels, 1532u);
}

// Public traces whose kernels map to ProfilerStep markers through launch correlation: the iterations detected
// from the kernel stream alone must be the marker steps.
TEST(Iteration, AgreesWithProfilerStepMarkersWithoutUsingThem) {
  if (!test::have_shared()) GTEST_SKIP() << "../shared/data absent in this checkout";
  const char* files[] = {
      "data/public_traces/facebookresearch_HolisticTraceAnalysis/tests/data/ns_resolution_trace/"
      "rank-0.Apr_03_18_51_38.1102.pt.trace.json.gz",
      "data/public_traces/facebookresearch_HolisticTraceAnalysis/tests/data/df_index_resolver/df_index_resolver.json.gz",
      "data/public_traces/pytorch_kineto/tb_plugin/samples/resnet50_num_workers_0/worker0.pt.trace.json.gz",
      "data/public_traces/pytorch_kineto/tb_plugin/samples/resnet50_num_workers_0/worker0.1623143566756.pt.trace.json.gz",
  };
  for (const char* f : files) {
    Trace t = import_trace(test::shared_path(f));
    ASSERT_GE(t.markers.size(), 2u) << f;
    auto by_markers = detect_iterations(t, {.use_markers = true});
    auto blind = detect_iterations(t, {.use_markers = false});
    ASSERT_EQ(by_markers.method, "step markers") << f;
    ASSERT_EQ(blind.method, "kernel-stream period") << f;
    EXPECT_EQ(blind.period_ops, by_markers.period_ops) << f;
    ASSERT_EQ(blind.iterations.size(), by_markers.iterations.size()) << f;
    for (std::size_t k = 0; k < blind.iterations.size(); ++k) {
      EXPECT_EQ(blind.iterations[k].start_ns, by_markers.iterations[k].start_ns) << f << " step " << k;
      EXPECT_EQ(blind.iterations[k].kernel_count, by_markers.iterations[k].kernel_count) << f << " step " << k;
    }
    EXPECT_DOUBLE_EQ(blind.tmpl.period_ns, by_markers.tmpl.period_ns) << f;
  }
}

// The DDP traces carry CPU ProfilerStep ranges but no launch events: rank 1's GPU lags its CPU by up to 41 ms
// (it waits in the all-reduce), so markers cannot cut the kernel stream; each detected step must start inside
// its own marker's CPU range (a kernel runs after its launch), one step per marker.
TEST(Iteration, DdpStepsLieInTheirMarkerRanges) {
  if (!test::have_shared()) GTEST_SKIP() << "../shared/data absent in this checkout";
  for (const char* f : {"data/traces/ddp2_gpt2m_rank0_h200_trace.json.gz", "data/traces/ddp2_gpt2m_rank1_h200_trace.json.gz"}) {
    Trace t = import_trace(test::shared_path(f));
    auto a = detect_iterations(t);
    EXPECT_EQ(a.method, "kernel-stream period") << f;
    std::vector<Marker> cpu;
    for (const auto& m : t.markers)
      if (!m.on_gpu) cpu.push_back(m);
    ASSERT_EQ(cpu.size(), 4u) << f;
    ASSERT_EQ(a.iterations.size(), 4u) << f;
    EXPECT_EQ(a.regular_count(), 4u) << f;
    for (std::size_t k = 0; k < 4; ++k) {
      EXPECT_GE(a.iterations[k].start_ns, cpu[k].start_ns) << f << " step " << k;
      EXPECT_LT(a.iterations[k].start_ns, cpu[k].start_ns + cpu[k].duration_ns) << f << " step " << k;
    }
    EXPECT_EQ(a.tmpl.kernels, 1799u) << f;  // both ranks launch the same kernels (rank 1 has a smaller batch)
  }
}

TEST(Iteration, FindsIterationsInPublicTracesWithoutMarkers) {
  if (!test::have_shared()) GTEST_SKIP() << "../shared/data absent in this checkout";
  Trace t = import_trace(test::shared_path("data/public_traces/facebookresearch_param/et_replay/tests/inputs/resnet_kineto.json.gz"));
  auto a = detect_iterations(t);
  EXPECT_GE(a.iterations.size(), 20u);  // README: 30 iterations
  EXPECT_GT(a.confidence, 0.8);
}

// The two tiny public traces hold no repeated step (4 kernels of one inference call; one synthetic kernel):
// a clear refusal, not a made-up period.
TEST(Iteration, RefusesTinyPublicTracesClearly) {
  if (!test::have_shared()) GTEST_SKIP() << "../shared/data absent in this checkout";
  for (const char* f : {"data/public_traces/facebookresearch_HolisticTraceAnalysis/tests/data/trace_file_list/inference_rank_1.json.gz",
                        "data/public_traces/facebookresearch_HolisticTraceAnalysis/tests/data/large_integer_trace/"
                        "rank-70.Mar_25_20_48_12.2861.pt.trace.json.gz"}) {
    Trace t = import_trace(test::shared_path(f));
    try {
      detect_iterations(t);
      ADD_FAILURE() << f;
    } catch (const NoIterationError& e) {
      EXPECT_FALSE(std::string(e.what()).empty());
    }
  }
}

}  // namespace
}  // namespace gearshift::trace
