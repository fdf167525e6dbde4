// The DVFS model: time and power of a kernel at any (SM clock, memory clock), with the board power cap.
//
//   t(f, m) = t_ref · (a·f_ref/f + b·m_ref/m + (1 − a − b))                          [docs/design.md, Physics]
//           = t_ref · (max(a·f_ref/f, b·m_ref/m) + 1 − max(a, b))   for a roofline kernel (KernelCoefficients::
//             time_law, model/time_law.hpp: one `gearshift calibrate` fitted so)
//   P(f, m) = P_idle(f) + P_k + s·u·P_dyn·(V(f)/V_max)²·(f/f_max) + w·P_mem·(m/m_max)
//   V(f)/V_max = v_min for f ≤ f_knee, linear from v_min at f_knee to 1 at f_max    (Schoonhoven et al., PMBS'22)
//   f_eff = the highest supported SM clock ≤ f with P(f_eff, m) ≤ the power limit the kernel meets (the GPU's
//           own power capping): the cap, raised where idle gaps fill part of the limit's averaging window
//           (power_limit_w below)
//
// a, b, u, w, P_k (static_w) are the kernel's KernelCoefficients; P_idle is interpolated between the spec's measured idle
// powers; s is a whole-trace activity scale calibrated to a measured J/step when the trace carries one.
#pragma once

#include "gpu/spec.hpp"
#include "model/kernel_class.hpp"

namespace gearshift::model {

struct ClockPair {
  int sm_mhz = 0;   // SM clock, MHz
  int mem_mhz = 0;  // memory clock, MHz
  bool operator==(const ClockPair&) const = default;
};

// Board-level power parameters (W, MHz). Defaults come from the GPU spec (see power_params_for).
struct PowerParams {
  double idle_w_at_min_clock = 0;  // W, measured idle at the lowest SM clock (spec)
  double idle_w_at_max_clock = 0;  // W, measured idle at the highest SM clock (spec)
  int min_sm_mhz = 0, max_sm_mhz = 0, knee_mhz = 0, max_mem_mhz = 0;
  double v_min_ratio = 0.70;  // V below the knee over V at max clock. Estimate (Hopper/Ampere V-f tables).
  double dynamic_w_at_max = 0;  // W drawn above idle by activity 1.0 at max SM clock
  double memory_w_at_max = 0;   // W drawn by full DRAM traffic at max memory clock (spec)
  double power_cap_w = 0;       // W, the enforced power limit
  double activity_scale = 1.0;  // s: calibrated whole-trace scale of activity (1 = priors as they are)
  // ns: once no kernel runs, the board's power falls from the last kernel's to the idle power with this time
  // constant (the spec's gap_power_decay_ns; 0: at once). A gap of G ns after a kernel drawing D W above idle
  // costs D·τ·(1 − exp(−G/τ)) more than the idle power (sim/simulator.hpp).
  double gap_decay_ns = 0;
  // When true, capping lowers the clock continuously to where P(f_eff) = cap instead of to a supported clock:
  // the GPU's power controller dithers between neighbouring clocks, so a time average sits between them
  // (the Perseus A100 sweeps show effective clocks between the 15 MHz steps). Set by model/fit.hpp.
  bool continuous_cap = false;
};

// Defaults for a spec. dynamic_w_at_max is set so that a dense GEMM (class prior: activity 1, traffic 0.3)
// draws exactly the power cap at the spec's observed capped SM clock (H200: 1875 MHz, the middle of the
// 1815–1935 MHz sag measured at 700 W, docs/design.md); without that observation, so that it asks 8 % more than
// the board power at max clock (estimate). `memory_w_at_max` overrides the spec's memory power (calibration).
PowerParams power_params_for(const gpu::GpuSpec& spec);
PowerParams power_params_for(const gpu::GpuSpec& spec, double memory_w_at_max);

struct Prediction {
  double time_ns = 0;       // ns
  double power_w = 0;       // W, board power while the kernel runs alone
  double idle_power_w = 0;  // W, the idle part of power_w at the effective clock
  double energy_j = 0;      // J = power_w · time
  int effective_sm_mhz = 0; // SM clock after power capping, MHz
  double effective_sm_mhz_avg = 0;  // MHz, the time-averaged clock after capping (= effective_sm_mhz unless
                                    // PowerParams::continuous_cap)
};

class DvfsModel {
 public:
  DvfsModel(gpu::GpuSpec spec, PowerParams params);
  explicit DvfsModel(const gpu::GpuSpec& spec) : DvfsModel(spec, power_params_for(spec)) {}

  const gpu::GpuSpec& spec() const { return spec_; }
  const PowerParams& params() const { return params_; }
  void set_activity_scale(double s) { params_.activity_scale = s; }
  void set_params(const PowerParams& p) { params_ = p; }

  double voltage_ratio(int sm_mhz) const;            // V(f)/V(f_max)
  double idle_power_w(int sm_mhz) const;             // W
  // ns: how long, at a kernel's power above idle, the board's fall to idle in a gap of `gap_ns` after it lasts:
  // τ·(1 − exp(−G/τ)) with τ = PowerParams::gap_decay_ns (0 when τ is 0). A gap costs its idle power plus that
  // times the kernel's power above idle.
  double gap_tail_ns(double gap_ns) const;
  double dynamic_power_w(ClockPair c, const KernelCoefficients& k) const;  // W above idle, no cap
  // The same three at a non-integer (time-averaged) SM clock, MHz.
  double voltage_ratio_at(double sm_mhz) const;
  double idle_power_w_at(double sm_mhz) const;
  double dynamic_power_w_at(double sm_mhz, int mem_mhz, const KernelCoefficients& k) const;
  // W: the power a kernel may draw when the share `window_idle_share` (in [0, 1)) of the power limit's averaging
  // window around it is spent idle. The GPU holds the window's AVERAGE power at the cap (gpu::GpuSpec::
  // power_limit_window_ns), so with kernels at P and idle gaps at P_idle(f_max):
  //   P·(1 − g) + P_idle(f_max)·g = cap  =>  P = (cap − P_idle(f_max)·g) / (1 − g).
  // Assumes the window's other kernels draw as much (the limit is shared); P_idle at the highest clock, the
  // larger idle figure, leaves the least headroom. g = 0 (no window, or a window with no gap): the cap.
  // model/workload.hpp computes g per template position.
  double power_limit_w(double window_idle_share) const;
  // The four below take that share too (0: the kernel meets the cap itself, the model before the window).
  // Board power of kernel k with `requested` clocks, after capping (W).
  double power_w(ClockPair requested, const KernelCoefficients& k, double window_idle_share = 0) const;
  // Time-averaged SM clock under the cap (MHz): capped_sm_clock unless params().continuous_cap.
  double capped_sm_clock_avg(ClockPair requested, const KernelCoefficients& k, double window_idle_share = 0) const;
  // SM clock the GPU really runs at when `requested` is locked: power capping lowers it (supported clocks).
  int capped_sm_clock(ClockPair requested, const KernelCoefficients& k, double window_idle_share = 0) const;
  // The clock a kernel ran at while traced at default clocks (no clock sample): the capped default clock.
  ClockPair default_reference(const KernelCoefficients& k, double window_idle_share = 0) const;

  // Predict a kernel measured `t_ref_ns` at `ref` when run with `requested` clocks locked.
  Prediction predict(double t_ref_ns, ClockPair ref, ClockPair requested, const KernelCoefficients& k,
                     double window_idle_share = 0) const;

 private:
  gpu::GpuSpec spec_;
  PowerParams params_;
};

}  // namespace gearshift::model
