#include "monitor/run_energy.hpp"

#include <fmt/core.h>

#include <chrono>
#include <thread>

#include "gpu/spec.hpp"

namespace gearshift::monitor {

RunEnergy::RunEnergy(unsigned nvml_index) : index_(nvml_index) {
  try {
    gpu::OpenedGpus g = gpu::open_gpus(false);
    if (nvml_index >= g.devices.size()) {
      unavailable_ = fmt::format("NVML has no GPU {}", nvml_index);
      return;
    }
    if (auto e = g.devices[nvml_index].total_energy_mj(); !e) {
      unavailable_ = "no energy counter (" + e.error().message + ")";
      return;
    }
    const std::string spec = gpu::spec_name_for_device(g.infos[nvml_index].name);
    tick_ns_ = gpu::find_spec(spec.empty() ? "h200" : spec).energy_counter_update_ns;
    gpus_ = std::move(g);
  } catch (const gpu::OpenError& e) {
    unavailable_ = e.what();
  }
}

std::optional<std::uint64_t> RunEnergy::read_mj() const {
  auto e = gpus_->devices[index_].total_energy_mj();
  if (!e) return std::nullopt;
  return e.value();
}

void RunEnergy::read(std::int64_t steady_ns, std::uint64_t steps) {
  const std::optional<std::uint64_t> mj = read_mj();
  if (!mj) return;  // one failed read: the previous one stands
  if (first_ns_ < 0) first_ns_ = steady_ns, first_mj_ = *mj, first_steps_ = steps;
  last_ns_ = steady_ns, last_mj_ = *mj, last_steps_ = steps;
}

std::optional<CounterAtTick> RunEnergy::counter(bool at_tick) const {
  if (!gpus_) return std::nullopt;
  auto now = [] {
    return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch())
        .count();
  };
  if (!at_tick) {
    const Ns t = now();
    const std::optional<std::uint64_t> mj = read_mj();
    if (!mj) return std::nullopt;
    return CounterAtTick{t, tick_ns_, static_cast<double>(*mj) * 1e-3, false};
  }
  const CounterSource src{[this] { return read_mj(); }, now,
                          [](Ns ns) { std::this_thread::sleep_for(std::chrono::nanoseconds(ns)); }};
  TickWait w;
  w.period_ns = tick_ns_;
  w.gap_ns = kTickReadGap.count();
  w.max_wait_ns = kTickWaitPeriods * tick_ns_;
  return read_at_tick(src, w);
}

std::optional<ClockState> RunEnergy::clocks() const {
  if (!gpus_) return std::nullopt;
  const gpu::Device& d = gpus_->devices[index_];
  auto sm = d.sm_clock_mhz();
  auto why = d.clock_event_reasons();
  if (!sm || !why) return std::nullopt;
  return ClockState{sm.value(), why.value().bits};
}

void RunEnergy::on_live_event(std::int64_t steady_ns, std::uint64_t steps) {
  if (!gpus_) return;
  // The first event only sets where the count stands: it may come anywhere in a step.
  const bool step_ended = seen_steps_ && steps > *seen_steps_;
  seen_steps_ = steps;
  if (step_ended && (last_ns_ < 0 || steady_ns - last_ns_ >= std::chrono::nanoseconds(kReadPeriod).count()))
    read(steady_ns, steps);
}

std::string RunEnergy::summary() const {
  if (!unavailable_.empty()) return "GPU energy not measured: " + unavailable_;
  if (first_ns_ < 0 || last_ns_ <= first_ns_ || last_mj_ < first_mj_ || last_steps_ <= first_steps_)
    return fmt::format("GPU energy not measured: the runtime did not follow the job over two step ends at least "
                       "{} ms apart once anchored (one counter read at each)",
                       kReadPeriod.count());
  const double j = static_cast<double>(last_mj_ - first_mj_) * 1e-3, s = static_cast<double>(last_ns_ - first_ns_) * 1e-9;
  const std::uint64_t n = last_steps_ - first_steps_;
  std::string line = fmt::format("GPU {} energy while live (measured, NVML energy counter): {:.1f} J over {:.2f} s, "
                                 "{:.0f} W, ",
                                 index_, j, s, j / s);
  const double tick_s = static_cast<double>(tick_ns_) * 1e-9;
  if (tick_s > kMaxTickShare * s)
    return line + fmt::format("{} steps (read where steps ended); J per step not said: the counter's {:g} ms tick "
                              "is {:.0f} % of a window this short (at least {:g} s for {:g} %)",
                              n, tick_s * 1e3, 100 * tick_s / s, tick_s / kMaxTickShare, 100 * kMaxTickShare);
  return line + fmt::format("{:.2f} J per step over {} steps (read where steps ended; within {:.1f} %: the counter's "
                            "{:g} ms tick over the window)",
                            j / static_cast<double>(n), n, 100 * tick_s / s, tick_s * 1e3);
}

}  // namespace gearshift::monitor
