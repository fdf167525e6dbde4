#include "report/plan_report.hpp"

#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <numeric>

#include "gpu/spec.hpp"
#include "sim/measurement.hpp"
#include "trace/gearshift_format.hpp"

namespace gearshift::report {
namespace {

// The shipped GPT-3 XL H200 trace planned as `gearshift plan` plans it (calibrated, phase at the spec's L).
struct Planned {
  trace::Trace trace;
  trace::IterationAnalysis iterations;
  model::DvfsModel model{gpu::find_spec("h200")};
  model::Workload workload;
  sim::Evaluation evaluation;
  const sim::StrategyResult* chosen = nullptr;

  explicit Planned(trace::Trace t) : trace(std::move(t)) {
    iterations = trace::detect_iterations(trace);
    workload = model::build_workload(trace, iterations, model);
    sim::calibrate_to_measured_power(workload, model, *trace.measured.average_power_w);
    sim::EvaluateOptions o;
    o.switch_latencies_ns.push_back(model.spec().switch_latency_ns);
    evaluation = sim::evaluate(workload, model, o);
    for (const auto& s : evaluation.strategies)
      if (s.schedule.strategy == plan::Strategy::phase && s.switch_latency_ns == model.spec().switch_latency_ns) chosen = &s;
  }
  PlanReportInput input() const {
    return PlanReportInput{trace,  iterations, workload, model, evaluation, *chosen, "gpt3xl.json.gz",
                           "gearshift plan gpt3xl.json.gz --report r.html", "2026-12-01T15:00:00Z", 0.005,
                           "h200, the GPU the trace names", "calibrated to 600 W", {}, {"a warning"}, nullptr};
  }
};

trace::Trace gpt3xl() {
  return trace::import_trace(std::string(GEARSHIFT_DATA_DIR) + "/traces/gpt3xl_h200_trace.json.gz");
}

const Planned& shipped() {
  static const Planned p(gpt3xl());
  return p;
}

double sum(const nlohmann::json& a) {
  double s = 0;
  for (const auto& v : a) s += v.get<double>();
  return s;
}

// The saving range's block: its median, and the sentence when the expected saving lies outside it (the page's
// caption adds it); null where the range holds it, and no block without a range.
TEST(PlanReport, SavingRangeSaysWhenTheExpectedSavingLiesOutsideIt) {
  PlanReportInput in = shipped().input();
  EXPECT_TRUE(plan_report_data(in)["saving_range"].is_null());
  sim::SavingRange g;
  g.samples = 200, g.low_quantile = 0.05, g.high_quantile = 0.95;
  g.saving_low_pct = 0.05, g.saving_expected_pct = 2.50, g.saving_high_pct = 2.31;
  g.share_below_expected = 0.965, g.saving_median_pct = 1.42;
  in.range = &g;
  nlohmann::json r = plan_report_data(in)["saving_range"];
  EXPECT_EQ(r["saving_median_pct"], 1.42);
  EXPECT_EQ(r["expected_outside_range"], "the expected 2.50 % lies above the range: 96.5 % of the draws save less, "
                                         "their median 1.42 %; read it as an upper figure");
  g.saving_high_pct = 2.60;
  EXPECT_TRUE(plan_report_data(in)["saving_range"]["expected_outside_range"].is_null());
}

TEST(PlanReport, EnergyPerClassAddsUpToTheSimulatedEnergies) {
  const auto& p = shipped();
  ASSERT_NE(p.chosen, nullptr);
  const auto d = plan_report_data(p.input());
  const auto& e = d["energy_by_class"];
  EXPECT_NEAR(sum(e["baseline_j"]), p.evaluation.baseline.energy_j, 1e-9 * p.evaluation.baseline.energy_j);
  EXPECT_NEAR(sum(e["plan_j"]), p.chosen->sim.energy_j, 1e-9 * p.chosen->sim.energy_j);
  ASSERT_GE(e["classes"].size(), 3u);
  EXPECT_EQ(e["classes"][0], "gemm");  // the largest class of a transformer step
  EXPECT_EQ(e["classes"].back(), "idle (board)");
  EXPECT_GT(e["baseline_j"].back().get<double>(), 0);
  // The plan runs the forward and backward at 1875 MHz, where the power cap holds most dense GEMMs anyway: their
  // energy stays within 0.1 % of the default clocks' (to 1e-9 before the limit's averaging window: GEMMs next to
  // gaps now run above 1875 MHz at default clocks), the saving is on the other classes.
  EXPECT_LE(e["plan_j"][0].get<double>(), e["baseline_j"][0].get<double>());
  EXPECT_NEAR(e["plan_j"][0].get<double>(), e["baseline_j"][0].get<double>(), 1e-3 * e["baseline_j"][0].get<double>());
  std::size_t saving = 0;
  for (std::size_t c = 1; c + 1 < e["classes"].size(); ++c)
    saving += e["plan_j"][c].get<double>() < e["baseline_j"][c].get<double>() * (1 - 1e-3);
  EXPECT_GE(saving, 2u);
}

TEST(PlanReport, TimelineHoldsEveryPositionAndThePlansClockTrack) {
  const auto& p = shipped();
  const auto t = plan_report_data(p.input())["timeline"];
  ASSERT_EQ(t["ops"].size(), p.workload.ops.size());
  EXPECT_DOUBLE_EQ(t["period_us"].get<double>(), p.workload.period_ns / 1e3);
  const auto& op0 = t["ops"][0];
  EXPECT_EQ(t["streams"][op0[0].get<std::size_t>()], p.workload.ops[0].stream);
  EXPECT_EQ(t["names"][op0[4].get<std::size_t>()], p.workload.ops[0].name);
  const auto& sm = t["planned"]["sm_mhz"];
  const auto& clocks = p.chosen->schedule.clocks;
  ASSERT_GE(sm.size(), 2u);
  EXPECT_EQ(sm[0][1], clocks[0].sm_mhz);
  EXPECT_EQ(sm.back()[0].get<double>(), p.workload.period_ns / 1e3);
  // One point per change (cyclic changes at position 0 aside) plus the first and the end.
  std::size_t changes = 0;
  for (std::size_t i = 1; i < clocks.size(); ++i) changes += !(clocks[i] == clocks[i - 1]);
  EXPECT_EQ(sm.size(), changes + 2);
  EXPECT_TRUE(t["measured"].is_null());  // the torch.profiler trace has no clock or power samples
}

TEST(PlanReport, MeasuredSamplesOfOneRegularStepAreShownAtTheirOffsets) {
  trace::Trace t = gpt3xl();
  const auto a = trace::detect_iterations(t);
  const trace::Iteration* step = nullptr;
  std::vector<const trace::Iteration*> regular;
  for (const auto& it : a.iterations)
    if (it.regular && it.excluded.empty()) regular.push_back(&it);
  ASSERT_FALSE(regular.empty());
  step = regular[regular.size() / 2];
  t.samples = {{a.device, step->start_ns + 1'000'000, 1755, 3201, 612'000},
               {a.device, step->start_ns + 2'000'000, 0, 3201, -1},  // SM clock and power not read
               {a.device + 1, step->start_ns + 3'000'000, 1980, 3201, 100'000}};  // another device
  const Planned p(std::move(t));
  const auto m = plan_report_data(p.input())["timeline"]["measured"];
  ASSERT_TRUE(m.is_object());
  EXPECT_NE(m["source"].get<std::string>().find("clock and power samples of step"), std::string::npos);
  ASSERT_EQ(m["sm_mhz"].size(), 1u);
  EXPECT_DOUBLE_EQ(m["sm_mhz"][0][0].get<double>(), 1000.0);  // µs from the step's start
  EXPECT_EQ(m["sm_mhz"][0][1], 1755);
  EXPECT_EQ(m["mem_mhz"].size(), 2u);
  ASSERT_EQ(m["power_w"].size(), 1u);
  EXPECT_DOUBLE_EQ(m["power_w"][0][1].get<double>(), 612.0);
}

TEST(PlanReport, FrontierAndLatencyCurvesAreTheEvaluations) {
  const auto& p = shipped();
  const auto d = plan_report_data(p.input());
  const auto& f = d["frontier"];
  ASSERT_EQ(f["budgets_pct"].size(), p.evaluation.frontier.size());
  ASSERT_EQ(f["series"].size(), p.evaluation.frontier.front().strategies.size());
  for (std::size_t k = 0; k < f["series"].size(); ++k)
    for (std::size_t b = 0; b < p.evaluation.frontier.size(); ++b) {
      const auto& s = p.evaluation.frontier[b].strategies[k];
      const auto& v = f["series"][k]["saving_pct"][b];
      if (s.within_budget) EXPECT_DOUBLE_EQ(v.get<double>(), s.saving_pct);
      else EXPECT_TRUE(v.is_null());
    }
  const auto& l = d["latency"];
  EXPECT_EQ(l["labels"][0], "0");
  std::size_t phases = 0;
  for (const auto& s : p.evaluation.strategies) phases += s.schedule.strategy == plan::Strategy::phase;
  EXPECT_EQ(l["labels"].size(), phases);
  // Saving never rises with L (sim/evaluate.hpp).
  for (std::size_t i = 1; i < l["saving_pct"].size(); ++i)
    EXPECT_LE(l["saving_pct"][i].get<double>(), l["saving_pct"][i - 1].get<double>() + 1e-9);
  EXPECT_EQ(d["evidence"]["warnings"][0], "a warning");
  EXPECT_EQ(d["provenance"]["command"], "gearshift plan gpt3xl.json.gz --report r.html");
}

std::size_t count(const std::string& s, const std::string& what) {
  std::size_t n = 0;
  for (std::size_t at = 0; (at = s.find(what, at)) != std::string::npos; at += what.size()) ++n;
  return n;
}

TEST(PlanReport, PageIsSelfContainedAndAKernelNameCannotEndAScript) {
  trace::Trace t = gpt3xl();
  t.names[0] += "</script><img src=x>";
  const Planned p(std::move(t));
  const std::string chart = "/*! Chart.js v3.9.1 */ window.Chart = function () {};";
  const std::string html = plan_report_html(p.input(), chart);
  EXPECT_NE(html.find(chart), std::string::npos);
  EXPECT_EQ(count(html, "<script"), count(html, "</script>"));
  EXPECT_EQ(count(html, "<script src"), 0u);
  EXPECT_EQ(count(html, "<link"), 0u);
  EXPECT_EQ(count(html, "<img"), 1u);  // the kernel name's own, inert text inside the JSON block
  EXPECT_NE(html.find("<\\/script><img src=x>"), std::string::npos);
  EXPECT_EQ(count(html, "@GEARSHIFT_"), 0u);
  EXPECT_NE(html.find("MIT License"), std::string::npos);
  // The data block parses back, the name intact.
  const auto at = html.find("id=\"gs-data\">") + 13;
  const auto end = html.find("</script>", at);
  const auto d = nlohmann::json::parse(html.substr(at, end - at));
  bool found = false;
  for (const auto& n : d["timeline"]["names"]) found |= n.get<std::string>().find("</script><img") != std::string::npos;
  EXPECT_TRUE(found);
}

struct EnvGuard {
  explicit EnvGuard(const std::string& v) { setenv("GEARSHIFT_CHARTJS", v.c_str(), 1); }
  ~EnvGuard() { unsetenv("GEARSHIFT_CHARTJS"); }
};

TEST(PlanReport, ChartJsComesFromTheEnvironmentOrSaysWhatToInstall) {
  const auto dir = std::filesystem::path(::testing::TempDir());
  {
    EnvGuard g((dir / "no-such-chart.js").string());
    try {
      load_chartjs();
      FAIL() << "a missing file was accepted";
    } catch (const ReportError& e) {
      EXPECT_NE(std::string(e.what()).find("GEARSHIFT_CHARTJS="), std::string::npos) << e.what();
    }
  }
  {
    const auto esm = dir / "chart.esm.js";
    std::ofstream(esm) << "/*! Chart.js v3.9.1 */ export { Chart };";
    EnvGuard g(esm.string());
    EXPECT_THROW(load_chartjs(), ReportError);
  }
  {
    const auto umd = dir / "chart.min.js";
    std::ofstream(umd) << "/*! Chart.js v3.9.1 */ window.Chart = 1;";
    EnvGuard g(umd.string());
    EXPECT_EQ(load_chartjs(), "/*! Chart.js v3.9.1 */ window.Chart = 1;");
  }
}

TEST(PlanReport, UnwritablePathIsAReportError) {
  const auto umd = std::filesystem::path(::testing::TempDir()) / "chart2.min.js";
  std::ofstream(umd) << "/*! Chart.js v3.9.1 */ window.Chart = 1;";
  EnvGuard g(umd.string());
  EXPECT_THROW(write_plan_report(shipped().input(), "/nonexistent-dir/r.html"), ReportError);
}

}  // namespace
}  // namespace gearshift::report
