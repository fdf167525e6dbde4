// What the input measured, and where the model disagrees with it (docs/model-validation.md, "Calibration").
//
// A trace carries measurements in two places: its producer's `meta` (measured s/step and J/step of an
// untraced run, NVML total-energy counter) and, in gearshift's own format, board-power samples taken every
// ~10 ms while it traced (nvmlDeviceGetPowerUsage). The calibration target is the meta's figure when given,
// else the time-weighted mean of the power samples that fall inside the detected steps.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "model/dvfs_model.hpp"
#include "model/workload.hpp"
#include "trace/iteration.hpp"
#include "trace/record.hpp"

namespace gearshift::sim {

// Power samples inside the steps fewer than this do not calibrate: NVML's power reading is an average over
// ~100 ms on Hopper (docs/design.md), so a few samples say little about a step.
inline constexpr std::size_t kMinPowerSamples = 10;
// A modelled baseline step time or energy farther than this from the measured one is a warning.
inline constexpr double kMaxModelDisagreement = 0.05;
// A plan calibrated to a measured power whose modelled baseline step is farther than this from the measured
// run's step is refused: the trace's step is not that run's (a profiler slowed it: torch.profiler's Llama trace
// ran 72 % longer), and its energy and saving would spread the run's power over another step's time. Before the
// board's fall to idle in gaps was modelled, such traces were refused only where no calibration reached their
// power.
inline constexpr double kMaxCalibratedStepDisagreement = 0.10;

struct MeasuredPower {
  double average_power_w = 0;  // W
  std::string source;          // plain words: where the figure comes from
  std::size_t samples = 0;     // power samples used (0: from meta)
};

// The measured average power of the trace's steps, or nullopt when the trace measured none (or too few
// samples: `why_not` says so when given).
std::optional<MeasuredPower> measured_power(const trace::Trace& trace, const trace::IterationAnalysis& steps,
                                            std::string* why_not = nullptr);

// The SM clock dense GEMMs actually held while traced (the median of their sampled clocks, gearshift traces),
// when at least kMinPowerSamples GEMM positions carry one: the sag at the power cap that the spec's
// `observed_capped_sm_clock_mhz` stands for, measured on this job. nullopt when not sampled.
std::optional<int> sampled_gemm_clock_mhz(const model::Workload& w);

// Warnings about a calibration that ended at a bound of its search (a sign of the wrong GPU, a wrong step or
// a trace whose power says little): the memory/uncore power at 0 W or at the board power, the activity scale at
// its limits, dense GEMMs capped below half the default SM clock. Empty when none.
std::vector<std::string> calibration_bound_warnings(const model::DvfsModel& m);

// The most of the board's maximum power that the memory power fitted by `gearshift calibrate` may be (the part of
// the power that follows the memory clock: DRAM, its PHY and controllers). The specs' own estimates are 12-13 %
// (data/gpus/*.json, memory_power_w_at_max_clock); DRAM access energy bounds it from physics: HBM2 moves data at
// about 3.9 pJ/bit (O'Connor et al., "Fine-Grained DRAM", MICRO'17), so the H200's 4.8 TB/s at full traffic
// draws about 150 W, 21 % of its 700 W. 40 % leaves twice that headroom. Not applied to the calibration to one
// measured power (calibrate_to_measured_power): its "memory/uncore" term also holds what the class priors miss
// (on the GPT-3 XL H200 trace, 344 W reproduces both the measured 668 W and the measured GEMM clock sag at the
// cap; 280 W with a larger activity scale caps GEMMs at 1710 MHz against 1815-1935 MHz measured). Above it the
// plan keeps the memory clock at its default (service/plan_job.cpp): an SM-clock plan leaves that power alone, a
// memory-clock change would count it as saved.
inline constexpr double kMaxMemoryShareOfBoard = 0.40;
// That share of `spec`'s board power, W: the most memory/uncore power a calibration may place in memory.
inline double max_memory_power_w(const gpu::GpuSpec& spec) { return kMaxMemoryShareOfBoard * spec.max_board_power_w; }

// Where a calibration put more memory/uncore power in `m` than memory can draw (kMaxMemoryShareOfBoard of the
// board), `m` with the memory clock held at the spec's default (the planners then leave that power alone: a
// memory-clock change would count it as saved), and the warning that says so. nullopt where the memory power is
// within the bound or the GPU has one memory clock. Callers refresh their workload's reference clocks with it.
struct MemoryClockHeld {
  model::DvfsModel model;
  std::string warning;
};
std::optional<MemoryClockHeld> hold_memory_clock(const model::DvfsModel& m);

// Reasons why calibrated board parameters are physically impossible (right or refused: a model that reproduces
// a measured power with such figures is not the GPU's): a negative or non-finite power; memory/uncore power at
// full traffic that with the idle power exceeds the board's max_board_power_w (the SMs idle); an idle power at
// or above the power cap (the GPU could run nothing); the SM dynamic power pinned at its 1 W floor
// (power_params_for: the memory power left the cap no room for compute); the activity scale outside (0, 5].
// Empty when possible.
std::vector<std::string> implausible_calibration(const model::DvfsModel& m);

// Why a plan calibrated to the measured run's power must be refused because the trace's step is not that run's
// (|modelled baseline step / measured step - 1| > kMaxCalibratedStepDisagreement); empty when it agrees or no
// step was measured (`measured_step_ns` <= 0). Steps in ns; `calibrated_to_w`: the power the model was
// calibrated to, W.
std::string calibrated_step_refusal(double modelled_step_ns, double measured_step_ns, double calibrated_to_w);

// Warnings where the modelled baseline differs from a measurement by more than kMaxModelDisagreement: the
// meta's s/step and J/step when given, else the trace's own step period (measured while tracing).
// `modelled_step_ns`: ns.
std::vector<std::string> disagreement_warnings(double modelled_step_ns, double modelled_energy_j,
                                               const trace::Trace& trace, const trace::IterationAnalysis& steps);

}  // namespace gearshift::sim
