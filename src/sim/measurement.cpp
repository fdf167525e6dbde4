#include "sim/measurement.hpp"

#include <algorithm>
#include <cmath>
#include <iterator>

#include <fmt/format.h>

#include "model/kernel_class.hpp"

namespace gearshift::sim {

std::optional<MeasuredPower> measured_power(const trace::Trace& t, const trace::IterationAnalysis& steps,
                                            std::string* why_not) {
  const auto& ms = t.measured;
  if (ms.average_power_w && *ms.average_power_w > 0)
    return MeasuredPower{*ms.average_power_w, "the trace's meta (NVML energy counter, untraced run)", 0};
  if (ms.energy_per_step_j && ms.step_time_s && *ms.step_time_s > 0)
    return MeasuredPower{*ms.energy_per_step_j / *ms.step_time_s,
                         "the trace's meta J/step over s/step (NVML energy counter, untraced run)", 0};
  if (t.samples.empty() || steps.iterations.empty()) return std::nullopt;
  const std::int64_t from = steps.iterations.front().start_ns, to = steps.iterations.back().end_ns;
  // Time-weighted mean: each sample holds until the next one (the reading is NVML's latest average).
  double weighted = 0, span = 0;
  std::size_t used = 0;
  const trace::DeviceSample* prev = nullptr;
  for (const auto& s : t.samples) {
    if (s.device != steps.device || s.power_mw < 0) continue;
    if (prev != nullptr && prev->time_ns >= from && s.time_ns <= to) {
      const double dt = static_cast<double>(s.time_ns - prev->time_ns);
      weighted += dt * prev->power_mw / 1000.0;
      span += dt;
      ++used;
    }
    prev = &s;
  }
  if (used < kMinPowerSamples || span <= 0) {
    if (why_not != nullptr)
      *why_not = fmt::format("{} power sample(s) inside the steps, fewer than the {} that calibrate", used,
                             kMinPowerSamples);
    return std::nullopt;
  }
  return MeasuredPower{weighted / span,
                       fmt::format("the trace's {} power samples inside the steps (NVML board power while traced)", used),
                       used};
}

std::optional<int> sampled_gemm_clock_mhz(const model::Workload& w) {
  std::vector<int> clocks;
  for (const auto& op : w.ops)
    if (op.cls == model::KernelClass::gemm && op.ref_sampled && op.ref.sm_mhz > 0) clocks.push_back(op.ref.sm_mhz);
  if (clocks.size() < kMinPowerSamples) return std::nullopt;
  std::nth_element(clocks.begin(), clocks.begin() + static_cast<std::ptrdiff_t>(clocks.size() / 2), clocks.end());
  return clocks[clocks.size() / 2];
}

std::vector<std::string> calibration_bound_warnings(const model::DvfsModel& m) {
  std::vector<std::string> w;
  const auto& p = m.params();
  const auto& spec = m.spec();
  // The search limits of calibrate_to_measured_power (sim/evaluate.cpp).
  if (p.memory_w_at_max <= 0.01 * spec.max_board_power_w)
    w.push_back(fmt::format("calibration ended at its bound: memory/uncore power {:.0f} W (the model draws too much "
                            "even with none: wrong GPU, or a step that is not the job's?)",
                            p.memory_w_at_max));
  if (p.memory_w_at_max >= 0.99 * spec.max_board_power_w)
    w.push_back(fmt::format("calibration ended at its bound: memory/uncore power {:.0f} W, the whole board power",
                            p.memory_w_at_max));
  if (p.activity_scale <= 0.0505 || p.activity_scale >= 4.99)
    w.push_back(fmt::format("calibration ended at its bound: activity scale {:.3f} (search 0.05 to 5): the measured "
                            "power cannot be reached with this GPU's figures",
                            p.activity_scale));
  const int capped = m.capped_sm_clock({spec.default_sm_clock_mhz, spec.default_mem_clock_mhz},
                                       model::class_prior(model::KernelClass::gemm));
  if (2 * capped < spec.default_sm_clock_mhz)
    w.push_back(fmt::format("calibration caps dense GEMMs at {} MHz, below half the default {} MHz SM clock: "
                            "implausible for a GPU at its power limit",
                            capped, spec.default_sm_clock_mhz));
  return w;
}

std::optional<MemoryClockHeld> hold_memory_clock(const model::DvfsModel& m) {
  const gpu::GpuSpec& spec = m.spec();
  const double bound_w = max_memory_power_w(spec);
  const double memory_w = m.params().memory_w_at_max;
  if (!(memory_w > bound_w) || spec.mem_clocks_mhz.size() <= 1) return std::nullopt;
  gpu::GpuSpec held = spec;
  held.mem_clocks_mhz = {held.default_mem_clock_mhz};
  return MemoryClockHeld{
      model::DvfsModel(held, m.params()),
      fmt::format("memory clock kept at its default {} MHz: the calibration puts {:.0f} W in memory/uncore power, more "
                  "than the {:.0f} W ({:.0f} % of the board) memory can draw, so a memory-clock saving would rest on "
                  "power the model cannot place",
                  held.default_mem_clock_mhz, memory_w, bound_w, 100 * kMaxMemoryShareOfBoard)};
}

std::vector<std::string> implausible_calibration(const model::DvfsModel& m) {
  std::vector<std::string> why;
  const auto& p = m.params();
  const auto& spec = m.spec();
  const double fields[] = {p.idle_w_at_min_clock, p.idle_w_at_max_clock, p.dynamic_w_at_max, p.memory_w_at_max,
                           p.power_cap_w};
  if (std::any_of(std::begin(fields), std::end(fields), [](double v) { return !std::isfinite(v) || v < 0; }))
    why.push_back(fmt::format("a negative or non-finite power (idle {:.0f}/{:.0f} W, dynamic {:.0f} W, memory {:.0f} W, "
                              "cap {:.0f} W)",
                              p.idle_w_at_min_clock, p.idle_w_at_max_clock, p.dynamic_w_at_max, p.memory_w_at_max,
                              p.power_cap_w));
  if (p.memory_w_at_max + p.idle_w_at_max_clock > spec.max_board_power_w)
    why.push_back(fmt::format("memory/uncore power {:.0f} W at full traffic plus the {:.0f} W idle power exceed the "
                              "{:.0f} W board power: no GPU draws that with its SMs idle",
                              p.memory_w_at_max, p.idle_w_at_max_clock, spec.max_board_power_w));
  if (p.idle_w_at_max_clock >= p.power_cap_w || p.idle_w_at_min_clock >= p.power_cap_w)
    why.push_back(fmt::format("idle power {:.0f} W at or above the {:.0f} W power cap", p.idle_w_at_max_clock,
                              p.power_cap_w));
  if (p.dynamic_w_at_max <= 1.0 + 1e-9)
    why.push_back(fmt::format("SM dynamic power pinned at its {:.0f} W floor: the memory/uncore power left the cap no "
                              "room for compute",
                              p.dynamic_w_at_max));
  if (!(p.activity_scale > 0 && p.activity_scale <= 5))
    why.push_back(fmt::format("activity scale {:.3f} outside (0, 5]", p.activity_scale));
  return why;
}

std::string calibrated_step_refusal(double modelled_step_ns, double measured_step_ns, double calibrated_to_w) {
  if (!(measured_step_ns > 0) || !(modelled_step_ns > 0)) return {};
  const double off = modelled_step_ns / measured_step_ns - 1;
  if (std::fabs(off) <= kMaxCalibratedStepDisagreement) return {};
  return fmt::format("the trace's step is not the measured run's step: modelled {:.4f} s at default clocks against "
                     "the measured {:.4f} s ({:+.1f} %, beyond {:.0f} %), so the measured {:.0f} W would be spread over "
                     "another step's time. Where a heavy profiler slowed the job, record it with `gearshift trace`",
                     modelled_step_ns * 1e-9, measured_step_ns * 1e-9, 100 * off,
                     100 * kMaxCalibratedStepDisagreement, calibrated_to_w);
}

std::vector<std::string> disagreement_warnings(double modelled_step_ns, double modelled_energy_j, const trace::Trace& t,
                                               const trace::IterationAnalysis& steps) {
  std::vector<std::string> w;
  const double modelled_step_s = modelled_step_ns * 1e-9;  // compared with the meta's s/step
  auto off = [](double a, double b) { return std::fabs(a - b) > kMaxModelDisagreement * b; };
  const auto& ms = t.measured;
  if (ms.step_time_s && *ms.step_time_s > 0 && off(modelled_step_s, *ms.step_time_s))
    w.push_back(fmt::format("modelled baseline step {:.4f} s differs from the measured {:.4f} s (trace meta, untraced "
                            "run) by {:+.1f} %: predicted figures are low-confidence",
                            modelled_step_s, *ms.step_time_s, 100 * (modelled_step_s / *ms.step_time_s - 1)));
  else if (!ms.step_time_s && steps.tmpl.period_ns > 0 && off(modelled_step_s, steps.tmpl.period_ns * 1e-9))
    w.push_back(fmt::format("modelled baseline step {:.4f} s differs from the trace's measured step period {:.4f} s "
                            "by {:+.1f} %: predicted figures are low-confidence",
                            modelled_step_s, steps.tmpl.period_ns * 1e-9,
                            100 * (modelled_step_s / (steps.tmpl.period_ns * 1e-9) - 1)));
  if (ms.energy_per_step_j && *ms.energy_per_step_j > 0 && off(modelled_energy_j, *ms.energy_per_step_j))
    w.push_back(fmt::format("modelled baseline energy {:.2f} J/step differs from the measured {:.2f} J/step by "
                            "{:+.1f} %: predicted figures are low-confidence",
                            modelled_energy_j, *ms.energy_per_step_j,
                            100 * (modelled_energy_j / *ms.energy_per_step_j - 1)));
  return w;
}

}  // namespace gearshift::sim
