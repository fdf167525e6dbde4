// Validation of the per-kernel DVFS model on the measured kernel sweeps (model/kernel_sweeps.hpp): for every
// kernel, fit the model from 3 clocks and predict the others; predict from one clock with the kernel's class
// prior (what `gearshift plan` does), or with an a set from DCGM activity counters; measure how far each
// kernel's sm_share a and power shape lie from its class prior, and the spread that part 3 of issue 20 (error
// bars, model/prior_spread.hpp) propagates. Used by bench/kernel_validation (docs/model-validation.md) and its
// test. All predictions are modelled; all references are the measured samples.
//
// Cross-fitting: the kernels of each (dataset, GPU) are split into two folds by their index (even / odd).
// Everything learnt from data — the board V-curve, the adjusted class priors, the counter regression, the
// spread used for the coverage check — is learnt on one fold and applied to the other, never to its own.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "gpu/spec.hpp"
#include "model/fit_validation.hpp"
#include "model/kernel_class.hpp"
#include "model/kernel_sweeps.hpp"

namespace gearshift::model {

// The class of a validation kernel by what its benchmark computes (README lists the benchmarks): a matrix
// multiply is gemm, a vector add elementwise, a dot product or sum reduction/norm, a transpose copy/memset;
// stencils, sorts, solvers and microbenchmarks are other. (gearshift's classify() reads CUDA library kernel
// names, which these benchmarks do not have: it puts almost all of them in other.)
KernelClass validation_class(const KernelSweep& k);

// Board model for a GPU of the datasets: the embedded spec for v100 and a100-pcie (a100's SXM figures); a
// stand-in for rtx8000 and gtxtitanx (no spec ships): clocks from the sweeps, idle power 0.9 × the lowest
// measured power at the lowest and highest clock, memory power 12 % of the board power, knee mid-range.
gpu::GpuSpec validation_spec(const std::string& gpu, const std::vector<const KernelSweep*>& sweeps);

// A board model for a GPU without a shipped spec (validation_spec's stand-ins, `gearshift validate-model` for a
// board named with its power limit): SM and memory clocks = those of the sweeps, power limit and board power =
// `power_limit_w` (W), idle power 0.9 × the lowest measured power at the lowest and at the highest SM clock
// (estimate: an upper bound of idle there), memory power 12 % of the power limit (as the shipped specs assume),
// voltage knee at the middle clock. Throws std::invalid_argument on fewer than 2 SM clocks or a limit ≤ 0.
gpu::GpuSpec stand_in_spec(const std::string& name, const std::string& full_name,
                           const std::vector<const KernelSweep*>& sweeps, double power_limit_w);

// Calibration clocks: interpolation = lowest, middle (index n/2), highest; extrapolation = the highest and,
// going down, the next clocks at least 100 MHz below the previous one (1530, 1425, 1320 MHz on V100).
std::vector<Split> kernel_splits(const std::vector<int>& clocks_mhz);

// Time and energy of a kernel measured once (`ref`) at `sm_mhz`, predicted with coefficients `c` as the plan
// does: time t_ref·(a·f_ref/f + 1 − a) (memory clock fixed); power P_idle(f) + k·D(f) where D is the model's
// above-idle power for `c` and k is set so that the power at f_ref equals the measured one (the plan's
// calibration to measured power, per kernel; k = 0 when the measured power is below idle).
struct OneClock {
  double time_s = 0, energy_j = 0;
};
OneClock predict_from_one_clock(const DvfsModel& board, const Sample& ref, const KernelCoefficients& c, int sm_mhz);

// Share of the above-idle power at `ref` that scales with the SM clock (the g·V²·f term), for coefficients c.
double dynamic_share(const DvfsModel& board, const KernelCoefficients& c, ClockPair ref);

// The kernel's a and power shape within the class prior's own family (the one-clock predictor above, from the
// sweep's top clock): a = the sm_share minimising Σ (t_pred/t − 1)² over the sweep (closed form, clamped to
// [0, 1]); activity_log = the ln-factor on the prior's activity minimising Σ (P_pred/P − 1)² (grid over
// [−4, 4] by 0.01, the power level matched at the top clock); dynamic_share = that fit's q at the top clock.
// So a − a_prior and activity_log are how far the prior must move to follow this kernel: its error.
struct KernelShape {
  double sm_share = 0, activity_log = 0, dynamic_share = 0;
  ClockPair ref;  // the top clock
};
KernelShape measured_shape(const std::vector<Sample>& sweep, const DvfsModel& board, const KernelCoefficients& prior);

// How far a class prior is from measured kernels: RMS over kernels of (a_measured − a_prior) and of
// activity_log. The error model of the priors (prior_spread.hpp).
// activity_log is taken relative to the median activity_log of the real-suite kernels of the same (dataset,
// GPU) and fold (`board_activity_log`): the median is the board model's own power-shape error (its idle line and
// V-curve), common to all kernels of that board; what is left is the priors' kernel-to-kernel error.
struct ShapeSpread {
  int n = 0;
  double sm_share_rms = 0;       // dimensionless
  double activity_log_rms = 0;   // natural log
  double sm_share_bias = 0;      // mean (a_measured − a_prior)
};

// One validation kernel at one memory clock.
struct SweepEval {
  std::string dataset, gpu, suite, kernel;
  std::string source;  // the file the kernel was read from (KernelSweep::source)
  int mem_mhz = 0;
  KernelClass cls = KernelClass::other;
  int fold = 0;  // 0 or 1
  std::vector<Sample> samples;
  std::vector<ActivityCounters> counters;  // parallel to samples (nv-dvfs), else empty
  // fit_kernel from 3 clocks (board V-curve and idle line from the other fold), with the naive baselines beside.
  std::vector<HeldOut> interp, extrap;
  std::vector<HeldOut> interp_spec, extrap_spec;  // the same with the GPU spec's V-curve (v100 only)
  std::vector<HeldOut> interp_additive, extrap_additive;  // the same board, time law T_c + A/f only (no roofline, r ≡ 1)
  std::vector<HeldOut> interp_flat, extrap_flat;  // the same board, fit_kernel without the board's time shape (r ≡ 1)
  // The interpolation fit (as interp) predicted at every clock of the sweep, its calibration clocks included, in
  // sample order: the model's clock choice (model/model_check.hpp).
  std::vector<HeldOut> interp_every;
  TimeLaw interp_law = TimeLaw::additive, extrap_law = TimeLaw::additive;  // the law fit_kernel chose
  // The board's time shape was offered and fit_kernel did not apply it: the calibration times rise with the clock
  // (FittedKernel::time_rises).
  bool interp_rises = false, extrap_rises = false;
  // From the top clock only, on the interpolation split's held-out clocks (model_* fields): the class prior;
  // the class prior with a = the median measured a of the class in the other fold (the prior-adjustment rule);
  // a from the counters (nv-dvfs only: the regression of the other fold).
  std::vector<HeldOut> prior, prior_adjusted, counter;
  KernelShape measured;       // from the whole sweep
  double activity_log_rel = 0;  // measured.activity_log − the board's median (board_activity_log, same fold)
  double prior_sm_share = 0;  // the class prior's a
  double prior_dynamic_share = 0;
  double counter_sm_share = -1;  // a from the counters (nv-dvfs), -1 when none
  double mem_share = -1;         // b measured from two memory clocks (gpuptx), -1 when not observable
};

// a from counters at the top clock: a = clamp(c0 + c1·DRAMA + c2·max(FP32A, FP64A, FP16A, TENSO), 0, 1),
// least squares on the training fold's measured a.
struct CounterRule {
  double c0 = 0, c1 = 0, c2 = 0;
  int n = 0;  // kernels it was fitted on
  double apply(const ActivityCounters& top) const;
};
CounterRule fit_counter_rule(const std::vector<const SweepEval*>& training);

struct KernelValidation {
  std::vector<SweepEval> sweeps;
  // Board V-curve per ("dataset/gpu", fold it is applied to).
  std::map<std::pair<std::string, int>, PowerParams> board_curves;
  // The 3-clock fit's board per ("dataset/gpu", fold): board_curves with the idle line fitted on the other fold
  // too (fit_idle_line). The one-clock prior figures (spread, coverage) keep board_curves' spec idle line.
  std::map<std::pair<std::string, int>, PowerParams> fit_boards;
  std::map<std::string, gpu::GpuSpec> specs;
  CounterRule counter_rule[2];  // applied to fold 0 / fold 1 (fitted on the other)
  // Median measured activity_log of the real-suite kernels per ("dataset/gpu", fold): the board's shape error.
  std::map<std::pair<std::string, int>, double> board_activity_log;
  // Relative σ of the measured times about a smooth law per ("dataset/gpu", fold it is applied to), from the
  // other fold's sweeps; sets each fit's FitOptions::kink_tolerance (at least its default).
  std::map<std::pair<std::string, int>, double> time_noise;
  // The board's time shape r(f) per ("dataset/gpu", fold it is applied to), fit_time_shape on the other fold's
  // sweeps (all suites and memory clocks), and whether it is used (FitOptions::time_shape of every 3-clock fit):
  // only when it lowers the time error inside that other fold (ShapeCheck).
  std::map<std::pair<std::string, int>, TimeShape> time_shapes;
  // The rule that decides, learnt on the other fold alone: its sweeps split in two halves by position, the shape
  // learnt on one half and the 3-clock fits (interpolation and extrapolation clocks) of the other half made with
  // and without it, both ways round; time MAPE % over their held-out clocks. Used when with < without.
  struct ShapeCheck {
    double without_pct = 0, with_pct = 0;
    bool checked = false;  // false: fewer than 4 sweeps in the other fold (not used)
    bool used = false;
  };
  std::map<std::pair<std::string, int>, ShapeCheck> shape_checks;
};

// Every sweep of `sweeps` with ≥ 4 clocks at a memory clock is evaluated (gpuptx: each memory clock a sweep).
// The board model of each GPU (KernelSweep::gpu) is `specs`' entry of that name where there is one, else
// validation_spec's. Throws std::invalid_argument where validation_spec or kernel_splits does.
KernelValidation validate_kernels(const std::vector<KernelSweep>& sweeps,
                                  const std::map<std::string, gpu::GpuSpec>& specs = {});

// ShapeSpread of class `cls` over the real-suite sweeps of `v` (fold -1: both folds).
ShapeSpread shape_spread(const KernelValidation& v, KernelClass cls, int fold = -1);

// The coverage check of the error bars on per-kernel mini-plans: for each real-suite kernel, the clock of the
// sweep (at or below the top) that minimises its class-prior predicted energy with predicted time ≤ (1 + ε)·
// t_top; the prior's activity moved by the board's median factor of the OTHER fold (a board calibration, as
// the V-curve); its predicted saving range from `samples` draws of (a, activity) with the class spread of the
// OTHER fold (normal in a, log-normal in activity, fixed seed), low/high = the 5th/95th percentiles; measured saving
// = 1 − E(f*)/E(top). `with_noise`: each draw also adds the measurement noise of the measured saving (two
// energies, each with the sweep's relative scatter about its neighbouring clocks), since the check compares
// with a measurement. Kernels whose plan stays at the top clock are counted apart (saving 0 on both sides).
// Each draw is matched to the kernel's measured power at the top clock (predict_from_one_clock), as the plan's
// draws are to the trace's measured power (sim/saving_range.hpp).
struct Coverage {
  int kernels = 0, trivial = 0, inside = 0;
  int expected_inside = 0;  // planned kernels whose expected (unperturbed prior) saving lies in their own range
  double predicted_over_budget = 0;  // mean predicted probability that the time budget is exceeded
  int measured_over_budget = 0;      // kernels whose measured time at f* exceeds the budget
  // Of the planned kernels whose measured saving lies outside the range: those within 2σ of it, σ the measured
  // saving's own noise (√2 × the sweep's relative energy scatter about its neighbouring clocks): a miss the
  // measurement cannot tell from a hit. And the median of the mini-plans' measured |saving| / that σ.
  int outside_within_noise = 0;
  double median_saving_over_noise = 0;
  double share() const { return kernels > trivial ? static_cast<double>(inside) / (kernels - trivial) : 0; }
};
Coverage mini_plan_coverage(const KernelValidation& v, double max_slowdown, bool with_noise, int samples = 300);

}  // namespace gearshift::model
