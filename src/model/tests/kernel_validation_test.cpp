#include "model/kernel_validation.hpp"

#include <gtest/gtest.h>

#include <filesystem>
#include <optional>
#include <string>

#include "model/prior_spread.hpp"

namespace gearshift::model {
namespace {

TEST(KernelSplits, InterpolationAndExtrapolationClocks) {
  const auto s = kernel_splits({502, 600, 705, 802, 945, 1087, 1102, 1237, 1380});
  EXPECT_EQ(s[0].calib_mhz, (std::vector<int>{502, 945, 1380}));
  EXPECT_EQ(s[1].calib_mhz, (std::vector<int>{1102, 1237, 1380}));  // each ≥ 100 MHz below the previous
  EXPECT_THROW(kernel_splits({1000, 1050, 1100}), std::invalid_argument);
  EXPECT_THROW(kernel_splits({1000, 1050, 1100, 1150}), std::invalid_argument);  // no 3 clocks 100 MHz apart
}

TEST(OneClockPredictor, ReproducesTheReferenceAndScalesTimeWithA) {
  const DvfsModel board(gpu::find_spec("v100"));
  const Sample top{1530, 877, 0.2, 30.0};
  const KernelCoefficients c = class_prior(KernelClass::gemm);  // a = 0.85
  const OneClock at_top = predict_from_one_clock(board, top, c, 1530);
  EXPECT_DOUBLE_EQ(at_top.time_s, 0.2);
  EXPECT_NEAR(at_top.energy_j, 30.0, 1e-9);  // the power level is matched at the reference
  const OneClock half = predict_from_one_clock(board, top, c, 765);
  EXPECT_NEAR(half.time_s, 0.2 * (0.85 * 2 + 0.15), 1e-12);
  EXPECT_LT(half.energy_j / half.time_s, 150.0);  // less power at half the clock
}

TEST(MeasuredShape, RecoversAOfASyntheticSweepInThePriorFamily) {
  const DvfsModel board(gpu::find_spec("v100"));
  const KernelCoefficients prior = class_prior(KernelClass::elementwise);
  KernelCoefficients truth = perturb(prior, 0.4, std::log(2.0));  // a = 0.55, activity × 2
  const Sample top{1530, 877, 0.1, 15.0};
  std::vector<Sample> sweep;
  for (int f : {600, 800, 1000, 1200, 1400}) {
    const OneClock p = predict_from_one_clock(board, top, truth, f);
    sweep.push_back({f, 877, p.time_s, p.energy_j});
  }
  sweep.push_back(top);
  const KernelShape s = measured_shape(sweep, board, prior);
  EXPECT_NEAR(s.sm_share, 0.55, 1e-9);
  EXPECT_NEAR(s.activity_log, std::log(2.0), 0.006);  // the grid's step is 0.01
}

// The real sweeps: the figures in docs/model-validation.md (bench/kernel_validation) must be reproduced.
const KernelValidation* validation() {
  static const std::optional<KernelValidation> v = []() -> std::optional<KernelValidation> {
    const std::string dir = std::string(GEARSHIFT_SHARED_DIR) + "/data/kernel_sweeps";
    if (!std::filesystem::exists(dir)) return std::nullopt;
    return validate_kernels(read_kernel_sweeps(dir));
  }();
  return v ? &*v : nullptr;
}

ErrorStats group_errors(const KernelValidation& v, const std::string& dataset, const std::string& gpu,
                        const std::string& suite, std::vector<HeldOut> SweepEval::*field) {
  std::vector<HeldOut> all;
  for (const auto& e : v.sweeps)
    if (e.dataset == dataset && e.gpu == gpu && e.suite == suite) all.insert(all.end(), (e.*field).begin(), (e.*field).end());
  return model_errors(all);
}

#define SKIP_WITHOUT_SHARED()                                                                 \
  if (validation() == nullptr) GTEST_SKIP() << "shared kernel sweeps not found under " \
                                            << GEARSHIFT_SHARED_DIR << "/data/kernel_sweeps"

void three_clock_fits_on_the_v100_sweeps(const KernelValidation& v) {
  // fit_kernel (roofline where its 3 clocks show a kink beyond 2σ of the dataset's time scatter, σ from the
  // other fold), board V-curve and idle line from the other fold, and the board's time shape r(f) from the other
  // fold where that fold's own check says it helps (used on nv-dvfs/v100 both folds, synergy/v100 fold 1).
  // Figures before the time shape (r ≡ 1) in the comments; they are asserted below as interp_flat. The shape is not
  // applied to a kernel whose calibration times rise with the clock (fit_kernel): before that rule SYnergy real
  // was 1.61 / 5.23 % (interpolation), 3.38 / 13.37 % (extrapolation), the spec V-curve's energy 5.39 %.
  const auto i = group_errors(v, "synergy", "v100", "real", &SweepEval::interp);
  EXPECT_EQ(i.n, 3588);  // 26 kernels × (141 clocks − 3 calibration clocks)
  EXPECT_NEAR(i.time_mape_pct, 1.52, 0.005);    // was 1.56 (r ≡ 1)
  EXPECT_NEAR(i.energy_mape_pct, 4.88, 0.005);  // was 4.85 (r ≡ 1): the energy target (≤ 5 %) is met
  const auto is = group_errors(v, "synergy", "v100", "real", &SweepEval::interp_spec);
  EXPECT_NEAR(is.energy_mape_pct, 5.05, 0.005);  // was 5.02
  const auto x = group_errors(v, "synergy", "v100", "real", &SweepEval::extrap);
  EXPECT_NEAR(x.time_mape_pct, 3.27, 0.005);     // was 3.61; 3.85 with the fixed 0.5 % tolerance; T_c + A/f alone: 3.23
  EXPECT_NEAR(x.energy_mape_pct, 12.61, 0.005);  // was 12.05
  // The one SYnergy real kernel whose calibration times rise (1.07 s at 1005 MHz, 1.25 s at 1530): with the shape
  // it was 8.67 / 14.65 %; without it (r ≡ 1), as before the shape.
  for (const auto& e : v.sweeps) {
    if (e.dataset != "synergy" || e.suite != "real") continue;
    EXPECT_EQ(e.interp_rises, e.kernel == "Spmv") << e.kernel;
    if (e.kernel != "Spmv") continue;
    const auto sp = model_errors(e.interp);
    EXPECT_NEAR(sp.time_mape_pct, 6.14, 0.005);
    EXPECT_NEAR(sp.energy_mape_pct, 5.67, 0.005);
  }
  const auto m = group_errors(v, "synergy", "v100", "micro", &SweepEval::interp);
  EXPECT_NEAR(m.time_mape_pct, 1.49, 0.005);  // was 1.48
  EXPECT_NEAR(m.energy_mape_pct, 4.36, 0.005);
  const auto n = group_errors(v, "nv-dvfs", "v100", "real", &SweepEval::interp);
  EXPECT_EQ(n.n, 120);
  EXPECT_NEAR(n.time_mape_pct, 2.70, 0.005);    // was 5.71 (r ≡ 1): the time target (≤ 3 %) is met
  EXPECT_NEAR(n.energy_mape_pct, 4.96, 0.005);  // was 4.81
  // What the rising-time rule costs: one NV-DVFS V100 microbenchmark (mixbench-cuda-alt/input019, 0.0078 s at 945
  // MHz, 0.0083 at 1380) whose slow 502 MHz sample does follow the board's shape: 1.87 / 4.21 % before the rule.
  const auto nm = group_errors(v, "nv-dvfs", "v100", "micro", &SweepEval::interp);
  EXPECT_NEAR(nm.time_mape_pct, 1.93, 0.005);
  EXPECT_NEAR(nm.energy_mape_pct, 4.24, 0.005);
  // The same without the board's time shape (r ≡ 1: the figures before it).
  const auto nf = group_errors(v, "nv-dvfs", "v100", "real", &SweepEval::interp_flat);
  EXPECT_NEAR(nf.time_mape_pct, 5.71, 0.005);
  EXPECT_NEAR(nf.energy_mape_pct, 4.81, 0.005);
  const auto sf = group_errors(v, "synergy", "v100", "real", &SweepEval::interp_flat);
  EXPECT_NEAR(sf.time_mape_pct, 1.56, 0.005);
  EXPECT_NEAR(sf.energy_mape_pct, 4.85, 0.005);
  // The same with T_c + A/f only (the law before the roofline).
  const auto ia = group_errors(v, "synergy", "v100", "real", &SweepEval::interp_additive);
  EXPECT_NEAR(ia.time_mape_pct, 2.34, 0.005);
  EXPECT_NEAR(ia.energy_mape_pct, 5.14, 0.005);
  const auto xa = group_errors(v, "synergy", "v100", "real", &SweepEval::extrap_additive);
  EXPECT_NEAR(xa.time_mape_pct, 3.23, 0.005);
  EXPECT_NEAR(xa.energy_mape_pct, 10.38, 0.005);
  const auto na = group_errors(v, "nv-dvfs", "v100", "real", &SweepEval::interp_additive);
  EXPECT_NEAR(na.time_mape_pct, 9.13, 0.005);
  EXPECT_NEAR(na.energy_mape_pct, 7.41, 0.005);
  int roofline = 0;
  for (const auto& e : v.sweeps)
    roofline += e.dataset == "nv-dvfs" && e.gpu == "v100" && e.suite == "real" && e.interp_law == TimeLaw::roofline;
  EXPECT_EQ(roofline, 0);  // was 11 (r ≡ 1): the shape bends T_c·r + A/f where the roofline's corner did
  EXPECT_NEAR(v.time_noise.at({"synergy/v100", 0}), 0.0051, 0.00005);
  EXPECT_NEAR(v.time_noise.at({"nv-dvfs/v100", 0}), 0.0027, 0.00005);
  // The board's time shape and the other fold's check that decides its use.
  const TimeShape& r = v.time_shapes.at({"nv-dvfs/v100", 0});
  ASSERT_EQ(r.sm_mhz.front(), 502);
  EXPECT_NEAR(r.factor.front(), 3.10, 0.005);  // memory-side time ×3.1 at 502 MHz against 945–1380 MHz
  EXPECT_NEAR(r.at(945), 1.0, 1e-9);
  EXPECT_NEAR(r.at(1380), 1.0, 1e-9);
  for (int f = 0; f < 2; ++f) EXPECT_TRUE(v.shape_checks.at({"nv-dvfs/v100", f}).used) << f;
  EXPECT_NEAR(v.shape_checks.at({"nv-dvfs/v100", 0}).without_pct, 9.11, 0.005);
  EXPECT_NEAR(v.shape_checks.at({"nv-dvfs/v100", 0}).with_pct, 3.40, 0.005);  // 3.23 before the rising-time rule
  EXPECT_FALSE(v.shape_checks.at({"synergy/v100", 0}).used);
  EXPECT_TRUE(v.shape_checks.at({"synergy/v100", 1}).used);
  for (int f = 0; f < 2; ++f) EXPECT_FALSE(v.shape_checks.at({"gpuptx/gtxtitanx", f}).used) << f;
}

void counters_beat_the_class_prior_on_held_out_kernels(const KernelValidation& v) {
  for (const char* gpu : {"v100", "rtx8000"})
    for (const char* suite : {"real", "micro"}) {
      const auto p = group_errors(v, "nv-dvfs", gpu, suite, &SweepEval::prior);
      const auto c = group_errors(v, "nv-dvfs", gpu, suite, &SweepEval::counter);
      EXPECT_EQ(p.n, c.n) << gpu << " " << suite;
      EXPECT_LT(c.time_mape_pct, p.time_mape_pct) << gpu << " " << suite;
    }
  const auto p = group_errors(v, "nv-dvfs", "v100", "real", &SweepEval::prior);
  const auto c = group_errors(v, "nv-dvfs", "v100", "real", &SweepEval::counter);
  EXPECT_NEAR(p.time_mape_pct, 14.71, 0.005);
  EXPECT_NEAR(c.time_mape_pct, 7.58, 0.005);
  EXPECT_NEAR(c.energy_mape_pct, 13.20, 0.005);  // energy: worse than the prior's 7.24 (the doc says why)
  EXPECT_NEAR(v.counter_rule[0].c1, -0.613, 0.0005);
  EXPECT_NEAR(v.counter_rule[1].c1, -0.559, 0.0005);
}

void the_shipped_prior_spread_is_the_measured_one(const KernelValidation& v) {
  for (KernelClass c : {KernelClass::gemm, KernelClass::elementwise, KernelClass::reduction_norm,
                        KernelClass::copy_memset, KernelClass::other}) {
    const ShapeSpread s = shape_spread(v, c);
    const PriorSpread p = prior_spread(c);
    EXPECT_EQ(s.n, p.kernels) << to_string(c);
    EXPECT_NEAR(s.sm_share_rms, p.sm_share_sd, 0.0005) << to_string(c);
    EXPECT_NEAR(s.activity_log_rms, p.activity_log_sd, 0.0005) << to_string(c);
  }
  // Unmeasured classes borrow the widest figures.
  EXPECT_DOUBLE_EQ(prior_spread(KernelClass::attention).sm_share_sd, prior_spread(KernelClass::elementwise).sm_share_sd);
  EXPECT_DOUBLE_EQ(prior_spread(KernelClass::communication).activity_log_sd, prior_spread(KernelClass::gemm).activity_log_sd);
}

void coverage_of_the_error_bars_on_mini_plans(const KernelValidation& v) {
  const Coverage c2 = mini_plan_coverage(v, 0.02, false), c5 = mini_plan_coverage(v, 0.05, false),
                 c10 = mini_plan_coverage(v, 0.10, false), n2 = mini_plan_coverage(v, 0.02, true);
  EXPECT_EQ(c5.kernels, 92);
  EXPECT_EQ(c5.kernels - c5.trivial, 77);
  EXPECT_EQ(c5.inside, 62);  // 80.5 %: the ≥ 80 % target of issue 20, just
  EXPECT_GE(c5.share(), 0.80);
  EXPECT_GE(c10.share(), 0.90);
  EXPECT_EQ(c2.inside, 38);  // 66.7 % at a 2 % budget: missed (the doc says why) ...
  EXPECT_EQ(n2.inside, 55);  // ... 96.5 % once the measured saving's own noise is in the range
  // ... and 17 of its 19 misses lie within 2σ of the range, σ the measured saving's own noise; the 2 % mini-plans
  // save a median 2.2σ (the doc: why the 2 % check cannot be met by the model's range).
  EXPECT_EQ(c2.outside_within_noise, 17);
  EXPECT_NEAR(c2.median_saving_over_noise, 2.2, 0.05);
  EXPECT_EQ(c5.outside_within_noise, 14);  // of 15 misses
  // The range holds the expected (unperturbed prior) saving of the mini-plan:
  for (const Coverage* c : {&c2, &c5, &c10}) EXPECT_EQ(c->expected_inside, c->kernels - c->trivial);
}

// One test: each CTest test is a process of its own, and the validation takes seconds.
TEST(KernelValidation, ReproducesTheDocumentedFigures) {
  SKIP_WITHOUT_SHARED();
  const auto& v = *validation();
  three_clock_fits_on_the_v100_sweeps(v);
  counters_beat_the_class_prior_on_held_out_kernels(v);
  the_shipped_prior_spread_is_the_measured_one(v);
  coverage_of_the_error_bars_on_mini_plans(v);
}

}  // namespace
}  // namespace gearshift::model
