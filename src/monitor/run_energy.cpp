#include "monitor/run_energy.hpp"

#include <fmt/core.h>


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
    gpus_ = std::move(g);
  } catch (const gpu::OpenError& e) {
    unavailable_ = e.what();
  }
}

void RunEnergy::read(std::int64_t steady_ns) {
  auto e = gpus_->devices[index_].total_energy_mj();
  if (!e) return;  // one failed read: the previous one stands
  if (first_ns_ < 0) first_ns_ = steady_ns, first_mj_ = e.value();
  last_ns_ = steady_ns, last_mj_ = e.value();
}

std::optional<double> RunEnergy::counter_j() const {
  if (!gpus_) return std::nullopt;
  auto e = gpus_->devices[index_].total_energy_mj();
  if (!e) return std::nullopt;
  return static_cast<double>(e.value()) * 1e-3;
}

void RunEnergy::on_live_event(std::int64_t steady_ns) {
  if (!gpus_) return;
  if (last_ns_ < 0 || steady_ns - last_ns_ >= std::chrono::nanoseconds(kReadPeriod).count()) read(steady_ns);
}

std::string RunEnergy::summary(std::uint64_t steps) const {
  if (!unavailable_.empty()) return "GPU energy not measured: " + unavailable_;
  if (first_ns_ < 0 || last_ns_ <= first_ns_ || last_mj_ < first_mj_)
    return "GPU energy not measured: the runtime was not live long enough for two counter reads";
  const double j = static_cast<double>(last_mj_ - first_mj_) * 1e-3, s = static_cast<double>(last_ns_ - first_ns_) * 1e-9;
  std::string line = fmt::format("GPU {} energy while live (measured, NVML energy counter): {:.1f} J over {:.2f} s, "
                                 "{:.0f} W",
                                 index_, j, s, j / s);
  if (steps > 1) line += fmt::format(", {:.2f} J per step over {} steps", j / static_cast<double>(steps), steps);
  return line;
}

}  // namespace gearshift::monitor
