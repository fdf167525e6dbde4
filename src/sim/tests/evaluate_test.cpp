#include "sim/evaluate.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <map>
#include <random>

#include "plan/clock_table.hpp"
#include "plan/strategies.hpp"
#include "sim/measurement.hpp"
#include "trace/gearshift_format.hpp"

namespace gearshift::sim {
namespace {

// The main job's "done when" on the shipped GPT-3 XL trace (embedded copy in data/).
TEST(Evaluate, GptThreeXlPlansMeetTheBudgetAndOrder) {
  trace::Trace t = trace::import_trace(std::string(GEARSHIFT_DATA_DIR) + "/traces/gpt3xl_h200_trace.json.gz");
  auto a = trace::detect_iterations(t);
  model::DvfsModel m(gpu::find_spec("h200"));
  model::Workload w = model::build_workload(t, a, m);
  const double measured_w = *t.measured.average_power_w;
  calibrate_to_measured_power(w, m, measured_w);
  EvaluateOptions o;
  o.max_slowdown = 0.005;
  Evaluation ev = evaluate(w, m, o);
  EXPECT_NEAR(ev.baseline.average_power_w, measured_w, 0.01 * measured_w);
  EXPECT_NEAR(ev.baseline.step_time_ns * 1e-9, a.tmpl.period_ns * 1e-9, 0.01 * a.tmpl.period_ns * 1e-9);
  auto find = [&](const std::string& name, double L = 0) -> const StrategyResult& {
    for (const auto& s : ev.strategies)
      if (plan::to_string(s.schedule.strategy) == name && s.switch_latency_ns == L) return s;
    throw std::runtime_error("missing " + name);
  };
  for (const auto& s : ev.strategies) {
    EXPECT_LE(s.slowdown_pct, 0.5 + 1e-9) << s.schedule.strategy << " L=" << s.switch_latency_ns;
    EXPECT_GE(s.saving_pct, 0) << s.schedule.strategy;
    EXPECT_TRUE(s.within_budget) << s.schedule.strategy << " L=" << s.switch_latency_ns;
  }
  const double global = find("kernel-global").saving_pct;
  EXPECT_GT(global, 0.5);
  EXPECT_GE(global, find("kernel-local").saving_pct);
  EXPECT_GE(global, find("pass").saving_pct);
  EXPECT_GE(find("pass").saving_pct, find("iteration").saving_pct - 1e-9);
  // The saving falls (never rises) as the switch latency grows.
  double prev = 1e9;
  for (double L : o.switch_latencies_ns) {
    double s = find("phase", L).saving_pct;
    EXPECT_LE(s, prev) << "L=" << L;
    prev = s;
  }
  EXPECT_GT(find("phase", 0).saving_pct, find("phase", 2e7).saving_pct);
  EXPECT_GE(find("phase", 2e7).saving_pct, find("iteration").saving_pct - 1e-9);
}

TEST(Evaluate, CalibrationRejectsNonPositivePower) {
  model::DvfsModel m(gpu::find_spec("h200"));
  model::Workload w;
  EXPECT_THROW(calibrate_to_measured_power(w, m, 0), std::invalid_argument);
}

// ---- One optimizer truth (issue 14 part 2) and the savings frontier (part 3) -------------------------------

const StrategyResult& find_in(const std::vector<StrategyResult>& v, const std::string& name, double L = -1) {
  for (const auto& s : v)
    if (plan::to_string(s.schedule.strategy) == name && (L < 0 || s.switch_latency_ns == L)) return s;
  throw std::runtime_error("missing " + name);
}

// Every invariant the evaluation promises, checked against the simulator itself.
void expect_one_truth(const model::Workload& w, const model::DvfsModel& m, const EvaluateOptions& o,
                      const Evaluation& ev, const std::string& what) {
  SCOPED_TRACE(what);
  const double eps_pct = o.max_slowdown * 100;
  const StrategyResult& global = find_in(ev.strategies, "kernel-global");
  std::vector<const StrategyResult*> phase;
  for (const auto& s : ev.strategies) {
    // (c) every plan within the budget, in the simulator, at the latency it is reported for.
    SimResult again = simulate(w, m, s.schedule, s.switch_latency_ns);
    EXPECT_GT(s.plan_ns, 0) << s.schedule.strategy;  // the planner's wall time, measured in ns
    EXPECT_LT(s.plan_ns, 600'000'000'000) << s.schedule.strategy;
    EXPECT_EQ(again.energy_j, s.sim.energy_j) << s.schedule.strategy << " L=" << s.switch_latency_ns;
    EXPECT_LE(s.slowdown_pct, eps_pct + 1e-9) << s.schedule.strategy << " L=" << s.switch_latency_ns;
    EXPECT_LE(s.sim.step_time_ns, ev.baseline.step_time_ns * (1 + o.max_slowdown) * (1 + 1e-12));
    // Every strategy's plan is a kernel plan: none saves more than kernel-global.
    EXPECT_LE(s.saving_pct, global.saving_pct + 1e-9) << s.schedule.strategy << " L=" << s.switch_latency_ns;
    if (s.schedule.strategy == plan::Strategy::phase) {
      phase.push_back(&s);
      // A phase plan of L has no late change, so it runs exactly as with instant switching.
      EXPECT_EQ(s.sim.late_changes, 0u) << "L=" << s.switch_latency_ns;
      SimResult ideal = simulate(w, m, s.schedule, 0);
      EXPECT_EQ(ideal.energy_j, s.sim.energy_j) << "L=" << s.switch_latency_ns;
      EXPECT_EQ(ideal.step_time_ns, s.sim.step_time_ns) << "L=" << s.switch_latency_ns;
    }
  }
  ASSERT_EQ(phase.size(), o.switch_latencies_ns.size());
  // (a) phase(L) <= the ideal kernel-global saving; (b) non-increasing in L.
  std::sort(phase.begin(), phase.end(), [](auto a, auto b) { return a->switch_latency_ns < b->switch_latency_ns; });
  for (std::size_t i = 0; i < phase.size(); ++i) {
    EXPECT_LE(phase[i]->saving_pct, global.saving_pct + 1e-9) << "L=" << phase[i]->switch_latency_ns;
    if (i > 0) {
      EXPECT_LE(phase[i]->saving_pct, phase[i - 1]->saving_pct + 1e-9) << "L=" << phase[i]->switch_latency_ns;
    }
  }
  EXPECT_EQ(phase.front()->saving_pct, global.saving_pct);  // L = 0
  EXPECT_GE(global.schedule.optimality_gap, 0);
  // The frontier: budgets ascending, each plan within its budget, no strategy's saving falling as the budget
  // grows, kernel-global on top, the main budget's row the main table's.
  ASSERT_EQ(ev.frontier.size(), o.frontier_slowdowns.size());
  std::map<plan::Strategy, double> prev;
  for (const auto& p : ev.frontier) {
    SCOPED_TRACE("budget " + std::to_string(p.max_slowdown));
    ASSERT_EQ(p.strategies.size(), 5u);
    const double g = find_in(p.strategies, "kernel-global").saving_pct;
    for (const auto& s : p.strategies) {
      EXPECT_TRUE(s.within_budget) << s.schedule.strategy;
      EXPECT_LE(s.slowdown_pct, p.max_slowdown * 100 + 1e-9) << s.schedule.strategy;
      EXPECT_LE(s.saving_pct, g + 1e-9) << s.schedule.strategy;
      if (prev.count(s.schedule.strategy)) {
        EXPECT_GE(s.saving_pct, prev[s.schedule.strategy] - 1e-9) << s.schedule.strategy;
      }
      prev[s.schedule.strategy] = s.saving_pct;
      if (s.schedule.strategy == plan::Strategy::phase) {
        EXPECT_EQ(s.switch_latency_ns, ev.frontier_latency_ns);
      }
      if (p.max_slowdown == o.max_slowdown) {
        EXPECT_EQ(s.saving_pct, find_in(ev.strategies, plan::to_string(s.schedule.strategy), s.switch_latency_ns).saving_pct);
      }
    }
  }
}

// Shipped and recorded traces, planned as `gearshift plan` does (calibrated to the trace's measured power).
class ShippedTrace : public ::testing::TestWithParam<std::string> {};

TEST_P(ShippedTrace, OneOptimizerTruth) {
  const std::string path = GetParam();
  if (!std::filesystem::exists(path)) GTEST_SKIP() << path << " absent (../shared)";
  trace::Trace t = trace::import_trace(path);
  auto a = trace::detect_iterations(t);
  model::DvfsModel m(gpu::find_spec("h200"));
  model::Workload w = model::build_workload(t, a, m);
  if (auto p = measured_power(t, a)) calibrate_to_measured_power(w, m, p->average_power_w);
  EvaluateOptions o;
  Evaluation ev = evaluate(w, m, o);
  expect_one_truth(w, m, o, ev, path);
  // The knapsack itself (before any other plan is taken) is within its proven gap of the best plan found: on
  // one stream the table is the simulator, so no plan of any strategy beats its lower bound.
  const plan::ClockTable table = plan::build_clock_table(w, m);
  if (!table.single_stream) return;
  double lower_bound = -1;
  plan::Schedule raw = plan::plan_kernel_global(
      table, plan::total_time_ns(table, table.default_index) + o.max_slowdown * ev.baseline.step_time_ns, &lower_bound);
  SimResult raw_sim = simulate(w, m, raw, 0);
  const StrategyResult& global = find_in(ev.strategies, "kernel-global");
  EXPECT_LE(raw_sim.energy_j, global.sim.energy_j * (1 + raw.optimality_gap) + 1e-12);
  EXPECT_LE(raw.optimality_gap, 1e-5);
  for (const auto& s : ev.strategies) EXPECT_GE(s.sim.energy_j, lower_bound * (1 - 1e-12)) << s.schedule.strategy;
}

INSTANTIATE_TEST_SUITE_P(
    Traces, ShippedTrace,
    ::testing::Values(std::string(GEARSHIFT_SHARED_DIR) + "/data/traces/gpt2_h200_trace.json.gz",
                      std::string(GEARSHIFT_SHARED_DIR) + "/data/traces/gpt3xl_h200_trace.json.gz",
                      std::string(GEARSHIFT_SHARED_DIR) + "/data/traces/ddp2_gpt2m_rank0_h200_trace.json.gz",
                      std::string(GEARSHIFT_SHARED_DIR) + "/data/traces/ddp2_gpt2m_rank1_h200_trace.json.gz",
                      std::string(GEARSHIFT_DATA_DIR) + "/step_traces/accum4_gpt2s.json.gz",
                      std::string(GEARSHIFT_DATA_DIR) + "/step_traces/llama_3steps.json.gz",
                      std::string(GEARSHIFT_DATA_DIR) + "/step_traces/ckpt_3steps.json.gz"),
    [](const ::testing::TestParamInfo<std::string>& param) {
      std::string s = std::filesystem::path(param.param).filename().string();
      s = s.substr(0, s.find('.'));
      for (char& c : s)
        if (!std::isalnum(static_cast<unsigned char>(c))) c = '_';
      return s;
    });

// Synthetic steps: ops of every class with log-uniform durations and idle gaps (some long), on one stream or
// with a second (communication) stream.
model::Workload synthetic(const model::DvfsModel& m, unsigned seed, std::size_t n, bool two_streams) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<double> u(0, 1);
  const model::KernelClass classes[] = {model::KernelClass::gemm, model::KernelClass::elementwise,
                                        model::KernelClass::reduction_norm, model::KernelClass::attention,
                                        model::KernelClass::optimizer, model::KernelClass::other};
  model::Workload w;
  double t = 0;
  for (std::size_t i = 0; i < n; ++i) {
    model::WorkloadOp op;
    const bool comm = two_streams && i % 9 == 4;
    op.cls = comm ? model::KernelClass::communication : classes[rng() % 6];
    op.name = "op" + std::to_string(i);
    op.coeffs = model::class_prior(op.cls);
    op.pass = i < n / 3 ? model::Pass::forward : i < n * 5 / 6 ? model::Pass::backward : model::Pass::optimizer;
    op.stream = comm ? 20 : 7;
    op.ref_time_ns = 2e3 * std::pow(1500.0, u(rng));  // 2 µs .. 3 ms
    op.ref = m.default_reference(op.coeffs);
    const double r = u(rng);
    op.gap_before_ns = r < 0.5 ? 0 : r < 0.9 ? 20e3 * u(rng) : 4e6 * u(rng);
    op.start_offset_ns = t;
    t += op.gap_before_ns + op.ref_time_ns;
    w.ops.push_back(op);
  }
  w.tail_ns = 1e6 * u(rng);
  w.period_ns = t + w.tail_ns;
  return w;
}

TEST(OneOptimizerTruth, SyntheticWorkloads) {
  model::DvfsModel m(gpu::find_spec("h200"));
  for (unsigned seed = 1; seed <= 8; ++seed)
    for (bool two : {false, true}) {
      model::Workload w = synthetic(m, seed, 150 + 40 * seed, two);
      for (double eps : {0.005, 0.03}) {
        EvaluateOptions o;
        o.max_slowdown = eps;
        Evaluation ev = evaluate(w, m, o);
        expect_one_truth(w, m, o, ev, "seed " + std::to_string(seed) + (two ? " two streams" : " one stream") +
                                          " eps " + std::to_string(eps));
      }
    }
}

// A GPU of 3 SM × 2 memory clocks, so that every plan of a 5-op step (6^5) can be simulated.
TEST(OneOptimizerTruth, KernelGlobalIsTheSimulatorsOptimumOverEveryPlan) {
  gpu::GpuSpec spec = gpu::find_spec("h200");
  spec.sm_clocks_mhz = {990, 1500, 1980};
  spec.mem_clocks_mhz = {2201, 3201};
  model::DvfsModel m(spec);
  model::Workload w;
  const model::KernelClass classes[] = {model::KernelClass::gemm, model::KernelClass::elementwise,
                                        model::KernelClass::gemm, model::KernelClass::optimizer,
                                        model::KernelClass::reduction_norm};
  const double times[] = {3e6, 1e6, 2e6, 1.5e6, 0.5e6}, gaps[] = {0, 2e6, 0, 5e5, 3e6};
  for (int i = 0; i < 5; ++i) {
    model::WorkloadOp op;
    op.cls = classes[i];
    op.coeffs = model::class_prior(op.cls);
    op.ref_time_ns = times[i];
    op.gap_before_ns = gaps[i];
    op.ref = m.default_reference(op.coeffs);
    op.stream = 7;
    w.ops.push_back(op);
  }
  w.tail_ns = 1e6;
  const plan::ClockTable table = plan::build_clock_table(w, m);
  ASSERT_EQ(table.clocks.size(), 6u);
  for (double eps : {0.0, 0.02, 0.1, 0.3}) {
    SCOPED_TRACE("eps " + std::to_string(eps));
    EvaluateOptions o;
    o.max_slowdown = eps;
    o.switch_latencies_ns = {0, 1e6, 3e6, 6e6};
    o.frontier_slowdowns = {};
    Evaluation ev = evaluate(w, m, o);
    const double limit = ev.baseline.step_time_ns * 1e-9 * (1 + eps) * (1 + 1e-12);
    double best = ev.baseline.energy_j;
    std::map<double, double> best_at;  // L -> least energy of the plans with no late change there
    std::vector<std::size_t> pick(5, 0);
    plan::Schedule s{plan::Strategy::baseline, 0, std::vector<model::ClockPair>(5), 0};
    for (;;) {
      for (std::size_t i = 0; i < 5; ++i) s.clocks[i] = table.clocks[pick[i]];
      SimResult r = simulate(w, m, s, 0);
      // Table sums are the simulator's figures on one stream.
      double e = 0, busy = 0;
      for (std::size_t i = 0; i < 5; ++i) e += table.energy(i, pick[i]), busy += table.time(i, pick[i]);
      EXPECT_NEAR(e, r.energy_j, 1e-12 * r.energy_j);
      EXPECT_NEAR(busy + 5.5e6 + w.tail_ns, r.step_time_ns, 1e-6);  // + the gaps and the tail
      if (r.step_time_ns * 1e-9 <= limit) best = std::min(best, r.energy_j);
      for (double L : o.switch_latencies_ns) {
        SimResult at = simulate(w, m, s, L);
        if (at.late_changes == 0 && at.step_time_ns * 1e-9 <= limit)
          best_at[L] = std::min(best_at.count(L) ? best_at[L] : ev.baseline.energy_j, at.energy_j);
      }
      std::size_t i = 0;
      while (i < 5 && ++pick[i] == table.clocks.size()) pick[i++] = 0;
      if (i == 5) break;
    }
    const StrategyResult& global = find_in(ev.strategies, "kernel-global");
    EXPECT_NEAR(global.sim.energy_j, best, 1e-12 * best);
    for (double L : o.switch_latencies_ns) {
      const StrategyResult& p = find_in(ev.strategies, "phase", L);
      EXPECT_GE(p.sim.energy_j, best_at[L] * (1 - 1e-12)) << "L=" << L;  // no plan beats the best feasible
      if (L == 0) {
        EXPECT_NEAR(best_at[L], best, 1e-12 * best);
      }
      EXPECT_GE(best_at[L], best * (1 - 1e-12)) << "L=" << L;  // no phase plan beats instant switching
    }
  }
}

}  // namespace
}  // namespace gearshift::sim
