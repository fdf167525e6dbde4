// The GPU energy `gearshift run` measures while its runtime follows the job (measured: NVML's total-energy
// counter, read only): J per step over the live steps, to set beside a framework's own figure (Megatron-LM's
// --log-energy) and the plan's modelled one. The counter is read from the feed reader at most every kReadPeriod
// while live events arrive, so the last read lies within that of the job's last GPU work and the job's exit
// (teardown at idle power) stays out. The counter ticks about every 100 ms on H200 (data/gpus/h200.json): each
// end errs by up to one tick of energy, under 1 % over a live phase of 20 s or more.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include "gpu/open_gpus.hpp"

namespace gearshift::monitor {

class RunEnergy {
 public:
  static constexpr std::chrono::milliseconds kReadPeriod{50};

  // `nvml_index`: the GPU the job runs on. Without NVML or an energy counter every call is a no-op and the
  // summary says why.
  explicit RunEnergy(unsigned nvml_index);

  // The feed reader, for every event while the runtime is live; `steady_ns`: std::chrono::steady_clock now.
  void on_live_event(std::int64_t steady_ns);

  // The counter now, J (read only, no state kept: safe from any thread); nullopt without NVML or on a failed read.
  std::optional<double> counter_j() const;

  // One line for the exit summary: energy, seconds and mean power from the first to the last live read, and J
  // per step over `steps` (the runtime's count of live steps).
  std::string summary(std::uint64_t steps) const;

 private:
  void read(std::int64_t steady_ns);

  std::optional<gpu::OpenedGpus> gpus_;
  unsigned index_ = 0;
  std::string unavailable_;  // why there is no figure (empty: available)
  std::int64_t first_ns_ = -1, last_ns_ = -1;
  std::uint64_t first_mj_ = 0, last_mj_ = 0;
};

}  // namespace gearshift::monitor
