// The error bars of `gearshift plan` on every shipped H200 trace that plans (data/traces, data/step_traces,
// ../shared/data/traces): the range must hold the expected saving, and the figures are the ones
// docs/model-validation.md prints ("Error bars on the shipped traces").
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include "service/error.hpp"
#include "service/plan_job.hpp"
#include "sim/saving_range.hpp"

namespace gearshift::service {
namespace {

namespace fs = std::filesystem;

std::vector<std::string> shipped_traces() {
  std::vector<std::string> out;
  for (const std::string& dir : {std::string(GEARSHIFT_DATA_DIR) + "/traces", std::string(GEARSHIFT_DATA_DIR) + "/step_traces",
                                std::string(GEARSHIFT_SHARED_DIR) + "/data/traces"}) {
    if (!fs::exists(dir)) continue;
    for (const auto& e : fs::directory_iterator(dir)) {
      const std::string p = e.path().string();
      if (p.ends_with(".json.gz") || p.ends_with(".jsonl.gz")) out.push_back(p);
    }
  }
  std::sort(out.begin(), out.end());
  return out;
}

struct Figures {
  double low, expected, high;
  bool expected_above = false;  // the expected saving lies above the range, and the plan says so
};

TEST(SavingRangeOnTraces, TheRangeHoldsTheExpectedSavingOnEveryShippedTrace) {
  // 5th / expected / 95th percentile of the saving, % (200 draws, the phase plan at the spec's latency,
  // --max-slowdown 0.5 %), as docs/model-validation.md prints them. Unconditioned draws (before) gave
  // -0.17 / 1.75 / 2.93 on gpt3xl and 1.79 / 9.38 / 10.05 on input_bound; on gearshift traces recorded on the
  // H200 (not shipped) they put the range below the expected saving (gradient checkpointing: -0.12 / 2.60 / 2.00).
  // With the board's fall to idle in gaps (data/gpus/h200.json) the calibrations change: before it, the same
  // draws gave 0.04 / 1.75 / 1.76, 2.95 / 4.04 / 5.04 and 8.27 / 9.38 / 9.91. With the power limit held on a
  // 0.6 ms average (the same file) GEMMs next to gaps may draw more: before it, 0.20 / 1.80 / 1.89 on gpt3xl and
  // 9.50 / 11.29 / 11.48 on input_bound (accum4 unchanged). Since the in-time check (service/plan_in_time.hpp)
  // input_bound's plan is its one clock pair: its 4-change phase plan (9.51 / 11.29 / 11.56 before) lands 95.1 %
  // of its kernel time in time when replayed on its own steps, its 2-change one 96.5 %, below the 97 % needed.
  // Since session 25 the range also holds the plan's saving in the other reading of power the calibration cannot
  // place (sim::include_other_reading): gpt3xl's 2.15 % (1.90 before) and input_bound's 3.73 % (3.39 before).
  // Megatron-LM's recorded iteration (session 26) is the exception the plan states: 96.5 % of the draws save less
  // than the expected 2.62 % (median 1.49 %), so the expected figure lies above the range; before, the plan printed
  // the range beside it without a word (sim::expected_outside_range). Its third step differs from the template by
  // 3 ops, so since session 28 its launches sit at their mean lead on the laid-out ops (trace/step/template.cpp,
  // LayOut::launches): 2.50 / 0.05-2.31 / median 1.42 before.
  // Since session 31 (issue 46, service/cpu_side.hpp) the two gearshift-trace excerpts, which carry no measured
  // untraced step, are replayed with the tracer's measured 3 µs per CPU call taken out: Megatron-LM's iteration
  // 275.8 -> 274.5 ms (2.62 / 0.07-2.42 / median 1.49 before), and the input-bound job's GPU, nearly as slow as its
  // loader, becomes the bottleneck (105.0 -> 104.0 ms): its one-pair saving 3.38 % (2.01-3.73) rested on 1 ms of
  // CPU wait that the tracer's own cost can explain.
  // Since session 34 a measured untraced step shorter than the step replayed as traced supports only the waits it
  // has room for (service/cpu_side.hpp, Reading::scaled_to_measured): accum4's 131.6 ms against its 141.2 ms replay
  // keeps 4.67 of its 14.30 ms of waits for the CPU (3.62 / 4.40 / 5.38 before, now shown apart).
  const std::map<std::string, Figures> documented = {
      {"gpt3xl_h200_trace.json.gz", {0.20, 1.80, 2.15}},
      {"megatron_excerpt_3steps.trace.jsonl.gz", {-0.14, 2.49, 2.30, true}},
      {"accum4_gpt2s.json.gz", {1.48, 1.88, 2.34}},
      {"input_bound_gpt2s_8steps.trace.jsonl.gz", {0.69, 1.03, 1.16}},
  };
  int planned = 0;
  for (const auto& path : shipped_traces()) {
    PlanJobOptions o;
    o.trace_path = path;
    o.display_name = fs::path(path).filename().string();
    o.gpu = "h200";
    PlanJobResult r;
    try {
      r = run_plan_job(o);
    } catch (const ServiceError& e) {
      // Traces the planner refuses (no step, or a model that cannot reproduce their power) have no range.
      EXPECT_TRUE(e.kind() == ServiceError::Kind::kNoIteration || e.kind() == ServiceError::Kind::kModelRefused)
          << o.display_name << ": " << e.what();
      continue;
    }
    ++planned;
    const sim::SavingRange& g = r.range;
    const auto it = documented.find(o.display_name);
    const std::string outside = sim::expected_outside_range(g);
    if (it != documented.end() && it->second.expected_above) {
      EXPECT_GT(g.saving_expected_pct, g.saving_high_pct) << o.display_name;
      EXPECT_NEAR(g.share_below_expected, 0.965, 1e-9) << o.display_name;
      EXPECT_NEAR(g.saving_median_pct, 1.36, 0.006) << o.display_name;
      EXPECT_EQ(outside, "the expected 2.49 % lies above the range: 96.5 % of the draws save less, their median 1.36 %; "
                         "read it as an upper figure")
          << o.display_name;
      EXPECT_EQ(report_json(o, r).at("saving_range").at("expected_outside_range"), outside) << o.display_name;
    } else {
      EXPECT_LE(g.saving_low_pct, g.saving_expected_pct) << o.display_name;
      EXPECT_GE(g.saving_high_pct, g.saving_expected_pct) << o.display_name;
      EXPECT_EQ(outside, "") << o.display_name;
      EXPECT_TRUE(report_json(o, r).at("saving_range").at("expected_outside_range").is_null()) << o.display_name;
    }
    EXPECT_LE(g.draws_rejected, g.samples / 50) << o.display_name;  // ≤ 2 % of the draws ruled out by the power
    if (it != documented.end()) {
      EXPECT_NEAR(g.saving_low_pct, it->second.low, 0.006) << o.display_name;
      EXPECT_NEAR(g.saving_expected_pct, it->second.expected, 0.006) << o.display_name;
      EXPECT_NEAR(g.saving_high_pct, it->second.high, 0.006) << o.display_name;
    }
  }
  EXPECT_GE(planned, 4);
}

// A plan with no measured power (here --no-calibrate on the embedded GPT-3 XL trace) has nothing to hold the
// draws to: its range takes unconditioned draws and says so. Held to the priors' own power, as before, the range
// was narrower on nothing (public ResNet-50 V100 trace: 30.3-35.5 % held, 6.3-32.1 % unconditioned).
TEST(SavingRangeOnTraces, APlanWithNoMeasuredPowerHoldsItsDrawsToNone) {
  PlanJobOptions o;
  o.trace_path = std::string(GEARSHIFT_DATA_DIR) + "/traces/gpt3xl_h200_trace.json.gz";
  o.display_name = "gpt3xl";
  o.calibrate = false;
  const PlanJobResult r = run_plan_job(o);
  ASSERT_FALSE(r.calibrated_to_w);
  EXPECT_FALSE(r.range.level_normalised);
  sim::RangeOptions held;
  held.samples = o.range_samples;
  const sim::SavingRange h =
      sim::saving_range(r.workload, *r.model, r.chosen->schedule, r.chosen->switch_latency_ns, o.max_slowdown, held);
  EXPECT_TRUE(h.level_normalised);
  EXPECT_GT(h.saving_high_pct - h.saving_low_pct, 0);
  EXPECT_GT(r.range.saving_high_pct - r.range.saving_low_pct, h.saving_high_pct - h.saving_low_pct);
  EXPECT_FALSE(report_json(o, r).at("saving_range").at("held_to_measured_power").get<bool>());
  o.calibrate = true;  // the trace's measured 668 W: held to it
  EXPECT_TRUE(run_plan_job(o).range.level_normalised);
}

}  // namespace
}  // namespace gearshift::service
