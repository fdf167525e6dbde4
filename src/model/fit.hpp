// Fitting the DVFS model of one kernel to a measured clock sweep: (SM clock, time, energy) → parameters that
// DvfsModel::predict uses as they are. The model (docs/design.md "Physics", at one memory clock):
//
//   time    t(f)  = T_c + A / f_eff                                   T_c [s], A [s·MHz]
//   power   P(f)  = P_idle(f_eff) + P_k + g·(V(f_eff)/V_max)²·f_eff    P_k [W], g [W/MHz]
//   cap     f_eff = f when P(f) ≤ P_cap, else the clock where P(f_eff) = P_cap (continuous: the controller
//                   dithers between supported clocks)
//   energy  E(f)  = P(f)·t(f)                                         J
//
// Fitted per kernel: T_c and A (time, least squares over the uncapped samples), P_k and g (power, least squares
// over the uncapped samples), and P_cap = the mean measured power of the capped samples (a capped GPU holds
// its power at the limit; the board's power_cap_w when no sample is capped). Taken from the board, not fitted
// per kernel: P_idle(f) (GPU spec), V(f) with its knee and v_min (spec, or fit_voltage_curve below).
// So 2 parameters per quantity plus the cap: three samples suffice (one of them may be capped).
//
// A sample is "capped" when its time exceeds the uncapped law fitted on the lower samples by more than
// FitOptions::cap_tolerance and it draws at least FitOptions::cap_power_share of the board's power limit; all
// samples above it are capped too (power rises with the clock).
// Physics priors for degenerate sweeps: a time that does not fall with the clock gives A = 0; a negative T_c
// gives T_c = 0 (a kernel cannot take negative clock-independent time); a power that falls with the clock
// gives g = 0.
//
// Roofline time law (the alternative to T_c + A/f): a kernel bound by the slower of its memory traffic and its
// SM work takes
//
//   t(f) = max(T_mem, A / f_eff)                                      T_mem [s], A [s·MHz]
//
// (1/f below the kink clock f_k = A/T_mem, flat above it: the memory clock is fixed). `T_c + A/f` adds the two
// terms (no overlap of memory and SM work) and cannot bend at f_k; measured V100 kernels (vectorAdd, transpose,
// Matrix_mul: docs/model-validation.md) follow 1/f up to a clock and are flat above it. Both laws have two
// parameters; with 3 or more uncapped samples the fit takes the roofline when T_c + A/f misses an uncapped sample
// by more than the measurement scatter (FitOptions::kink_tolerance), the roofline has samples on both sides of
// its kink and misses them less (largest relative error; model/time_law.hpp, the rule fit_time_pairs shares): the
// choice uses the calibration samples only. With 2 uncapped samples the two laws cannot be told apart (both pass exactly
// through them): T_c + A/f, as before.
//
// Board time shape (optional, FitOptions::time_shape): the part of a kernel's time that does not scale with 1/f
// need not be constant in f on a real board. On the NV-DVFS V100 (docs/model-validation.md) memory-heavy kernels
// run 20–45 % slower than either law at 502–600 MHz (t·f of BlackScholes 1.21/1.31 ms·GHz there against
// 0.90–1.03 at 705–945; compute-bound kernels keep t·f within 0.2 %), a change of regime shared by every kernel
// of the board. With a shape r(f) (1 at the board's top clock) the laws read
//
//   t(f) = T_c·r(f) + A/f_eff          or          t(f) = max(T_mem·r(f), A/f_eff)
//
// still 2 parameters per kernel; r is the board's, learnt from OTHER kernels' full sweeps (fit_time_shape), as
// the V-curve is. An empty shape is r ≡ 1 (the laws above, unchanged). The shape is not applied to a kernel whose
// samples' time rises with the clock (from one sample to the next by more than √2·FitOptions::kink_tolerance, the
// measured scatter of a difference of two times): both laws fall or stay flat as f rises, so such a kernel
// (SYnergy's Spmv on the V100, slower at 1530 MHz than at 915) is outside the family the shape was learnt on,
// and is fitted with r ≡ 1 (FittedKernel::time_rises).
#pragma once

#include <vector>

#include "model/dvfs_model.hpp"
#include "model/time_law.hpp"

namespace gearshift::model {

// One measurement of a kernel at locked clocks.
struct Sample {
  int sm_mhz = 0;         // locked SM clock, MHz
  int mem_mhz = 0;        // memory clock, MHz
  double time_s = 0;      // s, mean time of one run
  double energy_j = 0;    // J, mean energy of one run, the GPU's idle/static power included
};

// The board's shape r(f) of the clock-independent time term (header comment): r at the listed SM clocks (MHz,
// ascending), linear in f between them, the end values beyond them. Empty: r ≡ 1.
struct TimeShape {
  std::vector<int> sm_mhz;
  std::vector<double> factor;  // dimensionless, 1 at the top clock
  bool empty() const { return sm_mhz.empty(); }
  double at(double f_mhz) const;
};

struct FitOptions {
  // Relative. Above the scatter of measured times about a 1/f law below 1300 MHz in the Perseus A100 sweeps
  // (90 % of points within 0.31 %, median 0.09 %), so noise alone rarely marks a sample capped.
  double cap_tolerance = 0.005;
  // A sample can be capped only when it draws at least this share of the board's power limit
  // (board.params().power_cap_w): a GPU far below its limit is not capping. On the V100 kernel sweeps
  // (docs/model-validation.md) memory-bound kernels reach a time floor at 160 W of 300 W, which the time test
  // alone read as capping. The Perseus A100 samples judged capped draw 460–480 W of 400 W.
  double cap_power_share = 0.9;
  // Consider the roofline time law (header comment); false: T_c + A/f only (the law before it, for comparison).
  bool roofline = true;
  // Relative. T_c + A/f is replaced by the roofline only when it misses an uncapped sample by more than this: the
  // measured scatter of times about a smooth law (as cap_tolerance), so noise alone does not bend the law.
  // model/kernel_validation.cpp raises it to 2σ of each dataset's measured time scatter (σ from other kernels).
  // √2 of it is the rise between two samples beyond which the time is judged to rise with the clock (time_shape).
  double kink_tolerance = kDefaultKinkTolerance;
  // The board's time shape r(f) (header comment; fit_time_shape); empty: r ≡ 1.
  TimeShape time_shape;
};

struct FittedKernel {
  // What DvfsModel::predict needs: model(spec) below, t_ref_ns at ref, coeffs.
  KernelCoefficients coeffs;  // sm_share = (A/f_ref)/t_ref (roofline: 1 when SM-bound at ref, else 0: the local
                              // law there), mem_share = 0, activity = g scaled, mem_traffic = 0, static_w = P_k
  PowerParams power;          // the board's, with power_cap_w = P_cap and continuous_cap = true
  ClockPair ref;              // the highest uncapped sample's clocks
  double t_ref_ns = 0;        // ns, modelled time at ref

  // The same parameters in the physical form of the header comment.
  TimeLaw time_law = TimeLaw::additive;
  double clock_independent_s = 0;  // T_c, s (0 for the roofline law)
  double sm_scaled_s_mhz = 0;      // A, s·MHz
  double memory_bound_s = 0;       // T_mem, s (roofline law only; 0 otherwise)
  double static_w = 0;             // P_k, W
  double dynamic_w_per_mhz = 0;    // g, W/MHz at V = V_max
  double cap_w = 0;                // P_cap, W
  std::vector<int> capped_sm_mhz;  // the samples judged capped, MHz (empty when none)
  TimeShape time_shape;            // r(f) the fit used (FitOptions::time_shape); empty: r ≡ 1
  bool time_rises = false;         // the samples' time rises with the clock: FitOptions::time_shape not applied

  DvfsModel model(const gpu::GpuSpec& spec) const { return DvfsModel(spec, power); }
};

// Fit from samples at ≥ 2 distinct SM clocks and one memory clock, with the board's parameters from `board`.
// Throws std::invalid_argument on fewer than 2 samples, repeated clocks, mixed memory clocks, and
// non-positive or non-finite clocks, times or energies.
FittedKernel fit_kernel(const std::vector<Sample>& samples, const DvfsModel& board, const FitOptions& opts = {});

// Prediction at a locked SM clock (the fit's memory clock), from `model` = k.model(spec) (built once): power and
// the capped clock from DvfsModel::predict; time from k's law at that clock (the roofline's kink and the board's
// time shape are not in DvfsModel's one-reference law, whose time they replace); energy = power · time.
Prediction predict(const DvfsModel& model, const FittedKernel& k, int sm_mhz);

// The board's voltage curve (knee among the spec's supported clocks inside the sweeps' range, v_min from
// 0.50 to 0.95 by 0.01) that minimises the squared relative power error of the per-kernel fits over all
// uncapped samples of `kernels` (full sweeps of several kernels of one GPU). Returns board.params() with
// knee_mhz and v_min_ratio replaced. Throws std::invalid_argument when `kernels` is empty.
PowerParams fit_voltage_curve(const std::vector<std::vector<Sample>>& kernels, const DvfsModel& board,
                              const FitOptions& opts = {});

// The board's idle (static) power line: P_idle at the lowest and the highest SM clock, each 0.5–1.5 × board's by
// 0.05, that minimises the same squared relative power error as fit_voltage_curve over `kernels` (full sweeps
// of several kernels of one GPU; board's V-curve kept). Returns board.params() with the two idle figures
// replaced. Throws std::invalid_argument when `kernels` is empty.
PowerParams fit_idle_line(const std::vector<std::vector<Sample>>& kernels, const DvfsModel& board,
                          const FitOptions& opts = {});

// The board's time shape r(f) from full sweeps of several kernels of one GPU (one memory clock each):
// alternating least squares on relative time error of t_k(f) = T_k·r(f) + A_k/f over all samples (per kernel
// T_k, A_k ≥ 0 given r; per clock r given every T_k, A_k), r = 1 at the highest clock and at the middle one
// (index n/2 of the ascending clocks: T·r + A/f cannot tell r from (1 − μ)·r + μ·f_top/f, this fixes μ), until r
// moves by less than 1e-9 (at most 500 rounds). r is defined at every clock some kernel was measured at. Throws
// std::invalid_argument when `kernels` is empty or holds fewer than 2 distinct clocks.
TimeShape fit_time_shape(const std::vector<std::vector<Sample>>& kernels);

}  // namespace gearshift::model
