#include "plan/strategies.hpp"

#include <gtest/gtest.h>

#include "plan/mckp.hpp"

namespace gearshift::plan {
namespace {

// A small workload: compute-bound and memory-bound ops, three passes, on the H200 model.
model::Workload small_workload(const model::DvfsModel& m) {
  model::Workload w;
  const model::KernelClass classes[] = {model::KernelClass::gemm, model::KernelClass::elementwise,
                                        model::KernelClass::reduction_norm, model::KernelClass::gemm,
                                        model::KernelClass::elementwise, model::KernelClass::optimizer};
  const model::Pass passes[] = {model::Pass::forward, model::Pass::forward, model::Pass::backward,
                                model::Pass::backward, model::Pass::backward, model::Pass::optimizer};
  double t = 0;
  for (int i = 0; i < 6; ++i) {
    model::WorkloadOp op;
    op.name = "op" + std::to_string(i);
    op.cls = classes[i];
    op.coeffs = model::class_prior(op.cls);
    op.pass = passes[i];
    op.ref_time_ns = 1e6 * (1 + i % 3);
    op.ref = m.default_reference(op.coeffs);
    op.start_offset_ns = t;
    t += op.ref_time_ns;
    w.ops.push_back(op);
  }
  w.period_ns = t;
  return w;
}

struct Fixture : ::testing::Test {
  model::DvfsModel m{gpu::find_spec("h200")};
  model::Workload w = small_workload(m);
  ClockTable t = build_clock_table(w, m);
  double base = total_time_ns(t, t.default_index);
  double energy(const Schedule& s) const {
    double e = 0;
    for (std::size_t i = 0; i < s.clocks.size(); ++i) {
      auto c = std::find(t.clocks.begin(), t.clocks.end(), s.clocks[i]) - t.clocks.begin();
      e += t.energy(i, static_cast<std::size_t>(c));
    }
    return e;
  }
  double time(const Schedule& s) const {
    double x = 0;
    for (std::size_t i = 0; i < s.clocks.size(); ++i) {
      auto c = std::find(t.clocks.begin(), t.clocks.end(), s.clocks[i]) - t.clocks.begin();
      x += t.time(i, static_cast<std::size_t>(c));
    }
    return x;
  }
};

TEST_F(Fixture, TableHasEverySupportedPair) {
  EXPECT_EQ(t.clocks.size(), 220u);  // 110 SM × 2 memory clocks on H200
  EXPECT_EQ(t.clocks[t.default_index], (model::ClockPair{1980, 3201}));
}

TEST_F(Fixture, StrategiesRespectTheBudgetAndNest) {
  const double budget = base * 1.02;
  Schedule it = plan_iteration(t, budget), pass = plan_pass(t, w, budget), local = plan_kernel_local(t, 0.02),
           global = plan_kernel_global(t, budget);
  for (const Schedule* s : {&it, &pass, &global}) EXPECT_LE(time(*s), budget * (1 + 1e-12)) << s->strategy;
  for (std::size_t i = 0; i < w.ops.size(); ++i) {
    auto c = std::find(t.clocks.begin(), t.clocks.end(), local.clocks[i]) - t.clocks.begin();
    EXPECT_LE(t.time(i, static_cast<std::size_t>(c)), t.time(i, t.default_index) * 1.02 * (1 + 1e-12));
  }
  // Each strategy's choice set contains the previous one's: global <= pass <= iteration, global <= local.
  EXPECT_LE(energy(pass), energy(it) + 1e-12);
  EXPECT_LE(energy(global), energy(pass) + 1e-12);
  EXPECT_LE(energy(global), energy(local) + 1e-12);
  EXPECT_LT(energy(global), energy(Schedule{Strategy::baseline, 0, std::vector<model::ClockPair>(6, t.clocks[t.default_index]), 0}));
  // Memory-bound ops go below the max SM clock (docs/design.md / Spaan et al.).
  EXPECT_LT(global.clocks[1].sm_mhz, 1980);
}

TEST_F(Fixture, KernelGlobalEqualsBruteForceOnAReducedTable) {
  // Restrict to 6 clock pairs so that 6^6 combinations can be enumerated.
  std::vector<model::ClockPair> pick = {{1980, 3201}, {1755, 3201}, {1500, 3201}, {1200, 3201}, {1980, 2201}, {1200, 2201}};
  ClockTable small;
  small.clocks = pick;
  small.ops = t.ops;
  for (std::size_t i = 0; i < t.ops; ++i)
    for (auto p : pick) {
      auto c = static_cast<std::size_t>(std::find(t.clocks.begin(), t.clocks.end(), p) - t.clocks.begin());
      small.time_ns.push_back(t.time(i, c));
      small.energy_j.push_back(t.energy(i, c));
    }
  small.default_index = 0;
  const double b = total_time_ns(small, 0) * 1.05;
  MckpResult brute = solve_mckp_brute_force({small.ops, 6, small.time_ns.data(), small.energy_j.data()}, b);
  Schedule s = plan_kernel_global(small, b);
  double e = 0;
  for (std::size_t i = 0; i < s.clocks.size(); ++i)
    e += small.energy(i, static_cast<std::size_t>(std::find(pick.begin(), pick.end(), s.clocks[i]) - pick.begin()));
  EXPECT_NEAR(e, brute.energy, brute.energy * std::max(1e-12, s.optimality_gap));
  EXPECT_GE(s.optimality_gap, 0);
}

TEST_F(Fixture, PhasePlanWithZeroLatencyMatchesKernelLevelAndLongLatencyMergesPhases) {
  const double budget = base * 1.02;
  Schedule global = plan_kernel_global(t, budget);
  Schedule p0 = plan_phase(t, w, budget, 0);
  EXPECT_LE(time(p0), budget * (1 + 1e-12));
  EXPECT_LE(energy(p0), energy(global) * 1.01);  // Lagrangian DP: within the hull's duality gap
  // A latency longer than the whole step allows no useful change: one clock pair, like the iteration plan.
  Schedule plong = plan_phase(t, w, budget, 1e9);
  EXPECT_EQ(phases_of(plong).size(), 1u);
  EXPECT_NEAR(energy(plong), energy(plan_iteration(t, budget)), 1e-12);
}

TEST_F(Fixture, EveryPhaseLastsAtLeastTheLatencyOnTheFastestTimeline) {
  for (double L : {1e6, 2.5e6, 4e6}) {
    for (double slack : {1.01, 1.05, 1.3}) {
      Schedule s = plan_phase(t, w, base * slack, L);
      EXPECT_LE(time(s), base * slack * (1 + 1e-12));
      const auto changes = s.change_positions();
      for (std::size_t k = 0; k < changes.size(); ++k) {
        const double from = t.fastest_start_ns[changes[k]];
        const double to = k + 1 < changes.size() ? t.fastest_start_ns[changes[k + 1]]
                                                 : t.fastest_step_ns + t.fastest_start_ns[changes[0]];
        EXPECT_GE(to - from, L) << "L " << L << " phase from position " << changes[k];
      }
      // A plan of L is one of every shorter latency: the DP there does at least as well.
      EXPECT_LE(energy(plan_phase(t, w, base * slack, L / 2)), energy(s) * (1 + 1e-12) + 1e-9) << "L " << L;
    }
  }
}

TEST_F(Fixture, ChangePositionsAreCyclic) {
  Schedule s{Strategy::baseline, 0, {{1980, 3201}, {1500, 3201}, {1500, 3201}, {1980, 3201}}, 0};
  EXPECT_EQ(s.change_positions(), (std::vector<std::size_t>{1, 3}));
  auto ph = phases_of(s);
  ASSERT_EQ(ph.size(), 3u);
  EXPECT_EQ(ph[1].first, 1u);
  EXPECT_EQ(ph[1].last, 2u);
}

// The strategy names are parsed only at the edges (CLI, Python, plan.json): every planning strategy's name
// reads back as itself, "default" (the baseline) and anything else are no planning strategy.
TEST(Strategy, NamesRoundTripAndUnknownNamesAreRefused) {
  for (Strategy s : {Strategy::iteration, Strategy::pass, Strategy::kernel_local, Strategy::kernel_global,
                     Strategy::phase})
    EXPECT_EQ(parse_strategy(to_string(s)), s) << s;
  EXPECT_STREQ(to_string(Strategy::kernel_global), "kernel-global");
  EXPECT_STREQ(to_string(Strategy::baseline), "default");
  EXPECT_EQ(parse_strategy("default"), std::nullopt);
  EXPECT_EQ(parse_strategy("kernel_global"), std::nullopt);
  EXPECT_EQ(parse_strategy("Phase"), std::nullopt);
  EXPECT_EQ(parse_strategy(""), std::nullopt);
}

}  // namespace
}  // namespace gearshift::plan
