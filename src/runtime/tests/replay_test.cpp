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

// 24 steps of the synthetic sequence whose idle gap between steps varies (1, 2.5, 4 ms: the input pipeline), the
// CPU 2 ms ahead of the GPU (launch times recorded); the job synchronizes after every 10th step (loss.item()),
// recorded when `recorded`.
trace::Trace synthetic_with_syncs(bool recorded) {
  trace::Trace t = synthetic();
  t.ops.clear();
  std::vector<std::uint32_t> seq{0};
  for (int l = 0; l < 6; ++l) for (std::uint32_t k : {1u, 2u, 3u, 2u, 1u, 4u}) seq.push_back(k);
  seq.push_back(5);
  seq.push_back(6);
  std::int64_t t0 = 10'000'000, corr = 1;
  for (int s = 0; s < 24; ++s) {
    std::int64_t last_launch = 0;
    for (std::uint32_t k : seq) {
      trace::OpRecord r;
      r.name_id = k;
      r.start_ns = t0;
      r.duration_ns = 100'000;
      r.launch_ns = last_launch = t0 - 2'000'000;
      r.correlation = corr++;
      t.ops.push_back(r);
      t0 += 110'000;
    }
    if (s % 10 == 9) {  // waits for the step's last kernel; the next step is launched once it returned
      trace::SyncRecord y;
      y.scope = trace::SyncRecord::Scope::stream;
      y.correlation = corr++;
      y.enter_ns = last_launch + 10'000;
      y.duration_ns = (t0 - 10'000) - y.enter_ns;
      t.syncs.push_back(y);
      t0 += 3'000'000;
    } else {
      t0 += 1'000'000 + (s % 3) * 1'500'000;
    }
  }
  t.syncs_recorded = recorded;
  if (!recorded) t.syncs.clear();
  return t;
}

// The trace's own synchronizes (one per 10 steps) anchor, not one assumed per step: between them the estimate
// runs on the template's period and misses the steps whose idle gap differs (modelled values, asserted exactly).
TEST(Replay, RecordedSynchronizesAnchorInsteadOfOnePerStep) {
  const trace::Trace with = synthetic_with_syncs(true), without = synthetic_with_syncs(false);
  ClockPlan p = plan_for(with, {});
  ReplayOptions o;
  o.scheduler.switch_latency_ns = 200e3;
  o.sync_progress = true;
  ReplayResult rec = replay(with, p, o);
  EXPECT_EQ(rec.sync_source, SyncSource::trace);
  EXPECT_EQ(rec.syncs_used, 2u);
  EXPECT_EQ(rec.syncs_ignored, 0u);
  ReplayResult assumed = replay(without, p, o);
  EXPECT_EQ(assumed.sync_source, SyncSource::assumed_each_step);
  EXPECT_EQ(assumed.syncs_used, 24u);
  o.assume_sync_each_step = true;  // asked for: the same as a trace without them
  ReplayResult forced = replay(with, p, o);
  EXPECT_EQ(forced.sync_source, SyncSource::assumed_each_step);
  EXPECT_DOUBLE_EQ(forced.in_time_fraction, assumed.in_time_fraction);
  EXPECT_DOUBLE_EQ(rec.prediction_accuracy, 1.0);
  EXPECT_DOUBLE_EQ(assumed.prediction_accuracy, 1.0);
  std::printf("recorded: in-time %.6f dropped %llu late %llu; assumed: in-time %.6f dropped %llu late %llu\n",
              rec.in_time_fraction, static_cast<unsigned long long>(rec.dropped_changes),
              static_cast<unsigned long long>(rec.late_changes), assumed.in_time_fraction,
              static_cast<unsigned long long>(assumed.dropped_changes),
              static_cast<unsigned long long>(assumed.late_changes));
  EXPECT_NEAR(rec.in_time_fraction, 0.567847, 1e-6);  // 0.560671 while staleness counted launches
  // 0 (was 105 before a stale anchor made the scheduler resync): the boundaries that passed while the estimate
  // had no fresh anchor are skipped at the resync, as after a relock, not counted as dropped; in-time unchanged.
  EXPECT_EQ(rec.dropped_changes, 0u);
  EXPECT_NEAR(assumed.in_time_fraction, 0.625583, 1e-6);
  EXPECT_EQ(assumed.dropped_changes, 22u);
  EXPECT_LT(rec.in_time_fraction, assumed.in_time_fraction - 0.05);
  // An event synchronize waits only for the work before its event: live does not anchor on it, nor replay.
  trace::Trace ev = with;
  for (auto& y : ev.syncs) y.scope = trace::SyncRecord::Scope::event;
  o.assume_sync_each_step = false;
  ReplayResult none = replay(ev, p, o);
  EXPECT_EQ(none.sync_source, SyncSource::trace);
  EXPECT_EQ(none.syncs_used, 0u);
  EXPECT_EQ(none.syncs_ignored, 2u);
  EXPECT_LE(none.in_time_fraction, rec.in_time_fraction);
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
