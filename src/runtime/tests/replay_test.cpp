// Replay of the shipped real traces (../shared; skipped when absent) and of a synthetic trace.
#include "runtime/replay.hpp"

#include <filesystem>

#include <gtest/gtest.h>

#include "trace/iteration.hpp"

namespace gearshift::runtime {
namespace {

// A synthetic trace: 6 steps of a 40-kernel sequence with repeated "layers", 100 µs kernels, 10 µs gaps.
trace::Trace synthetic() {
  trace::Trace t;
  t.names = {"embed", "ln", "gemm", "attn", "gelu", "loss", "adam"};
  std::vector<std::uint32_t> seq{0};
  for (int l = 0; l < 6; ++l) for (std::uint32_t k : {1u, 2u, 3u, 2u, 1u, 4u}) seq.push_back(k);
  seq.push_back(5);
  seq.push_back(6);
  std::int64_t t0 = 0;
  for (int s = 0; s < 6; ++s) {
    for (std::uint32_t k : seq) {
      trace::OpRecord r;
      r.name_id = k;
      r.start_ns = t0;
      r.duration_ns = 100'000;
      t.ops.push_back(r);
      t0 += 110'000;
    }
    t0 += 2'000'000;  // step boundary idle
  }
  return t;
}

ClockPlan plan_for(const trace::Trace& t, const std::vector<std::uint32_t>& seq_low) {
  (void)seq_low;
  ClockPlan p;
  p.gpu = "h200";
  p.default_clocks = {1980, 3201};
  trace::IterationAnalysis an = trace::detect_iterations(t);
  p.period_ns = an.tmpl.period_ns;
  for (const auto& op : an.tmpl.ops) {
    const std::string& n = t.names[op.name_id];
    // Low SM clock for the elementwise middle of each step, default elsewhere: a few long phases.
    bool low = n == "gelu" || n == "ln";
    p.positions.push_back({n, op.duration_ns, op.start_offset_ns, low ? model::ClockPair{1200, 3201} : model::ClockPair{1980, 3201}});
  }
  return p;
}

TEST(Replay, SyntheticUnperturbedIsExact) {
  auto t = synthetic();
  auto p = plan_for(t, {});
  ReplayOptions o;
  o.scheduler.switch_latency_ns = 0;
  ReplayResult r = replay(t, p, o);
  EXPECT_GT(r.scored_launches, 150u);
  EXPECT_DOUBLE_EQ(r.prediction_accuracy, 1.0);
  EXPECT_GT(r.next_kernel_accuracy, 0.99);
  EXPECT_GT(r.in_time_fraction, 0.99);  // L = 0: every change lands on its boundary
  EXPECT_EQ(r.dropped_changes, 0u);
  EXPECT_GE(r.steps, 5u);
}

TEST(Replay, LatencyLongerThanPhasesMergesOrDrops) {
  auto t = synthetic();
  auto p = plan_for(t, {});
  ReplayOptions o;
  o.scheduler.switch_latency_ns = 0.5e6;  // phases are 110 µs: all merged at min interval = L
  o.scheduler.min_interval_ns = 0.5e6;
  ReplayResult r = replay(t, p, o);
  EXPECT_GT(r.merged_changes, 0u);
  EXPECT_LT(r.in_time_fraction, 0.95);
}

// Kernel activity recorded only part of the time (a way to cut CUPTI's per-kernel cost). On this perfectly
// regular trace the completions of every other step anchor the estimates exactly; with the first kernel's
// only, the anchor goes stale and the scheduler keeps the default clocks (the plan's 1200 MHz phases missed).
TEST(Replay, SampledActivityTradesInTimeFraction) {
  auto t = synthetic();
  auto p = plan_for(t, {});
  ReplayOptions o;
  o.scheduler.switch_latency_ns = 0.2e6;
  const double full = replay(t, p, o).in_time_fraction;
  o.activity_period_ns = 12.8e6 + 1e5;  // about two steps, not aligned with them
  o.activity_window_ns = 6.4e6;         // about one of them
  const double half = replay(t, p, o).in_time_fraction;
  o.activity_period_ns = 1e15;          // only the first kernel's completion
  o.activity_window_ns = 1;
  ReplayResult first_only = replay(t, p, o);
  EXPECT_GT(full, 0.99);
  EXPECT_GT(half, 0.99);
  EXPECT_LT(first_only.in_time_fraction, 0.8);
  EXPECT_EQ(first_only.prediction_accuracy, 1.0);  // prediction needs launches only
}

TEST(Replay, PerturbedStaysAccurate) {
  auto t = synthetic();
  auto p = plan_for(t, {});
  ReplayOptions o;
  o.perturb = parse_perturbation("drop=0.02,insert=0.02,swap=0.01");
  ReplayResult r = replay(t, p, o);
  EXPECT_GT(r.dropped_ops + r.inserted_ops, 0u);
  EXPECT_GT(r.prediction_accuracy, 0.95);
}

TEST(Replay, ParsePerturbation) {
  auto p = parse_perturbation("drop=1%,insert=0.02");
  EXPECT_DOUBLE_EQ(p.drop, 0.01);
  EXPECT_DOUBLE_EQ(p.insert, 0.02);
  EXPECT_DOUBLE_EQ(p.swap, 0);
  EXPECT_THROW(parse_perturbation("drop=2"), std::invalid_argument);
  EXPECT_THROW(parse_perturbation("foo=0.1"), std::invalid_argument);
  EXPECT_THROW(parse_perturbation("drop"), std::invalid_argument);
}

}  // namespace
}  // namespace gearshift::runtime
