// The GPU energy `gearshift run` measures while its runtime follows the job (measured: NVML's total-energy
// counter, read only): J per step, to set beside a framework's own figure (Megatron-LM's --log-energy) and the
// plan's modelled one. The counter is read from the feed reader only where a step ends (the first event after
// the runtime's count of whole steps rose: LiveRuntime::steps(), RuntimeCore::complete_steps()), from the
// runtime's first anchor on (the plan's clocks begin there), and at most every kReadPeriod. The energy between the
// first and the last read is then that of the whole steps between them: launches before the first step and work
// after the last one (an evaluation, a checkpoint save, the job's exit at idle power) stay out, and work that
// starts like a step but is none (an evaluation's forward passes) neither moves the count nor is read at. Before,
// the window ran from the first live event to the last and was divided by every step counted, which overstates J
// per step by whatever time without steps the window held (Run.EnergyPerStepLeavesOutWorkAfterTheLastStep: 15.15 J
// against 10 J).
// The counter ticks every energy_counter_update_ms of the GPU's spec (data/gpus/*.json: 100 ms, observed on an H200
// and estimated the same for the others; h200's for a GPU without a spec): the difference of two reads errs by up
// to one tick of energy, 1 % over a window of 10 s. J per step is said with that bound, and not said over a window
// of which one tick is more than kMaxTickShare: a 0.60 s window read 15.95 J per step for a job of 13.82 J (H200,
// torch.compile, 2026-12-04).
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include "gpu/open_gpus.hpp"
#include "monitor/counter_tick.hpp"

namespace gearshift::monitor {

// The GPU's SM clock and clock-event reason bits at one read (NVML, read only).
struct ClockState {
  unsigned sm_mhz = 0;
  std::uint64_t reasons = 0;  // nvmlClocksEventReason* bits
};

class RunEnergy {
 public:
  static constexpr std::chrono::milliseconds kReadPeriod{50};
  // Between reads while waiting for a tick: with a read's ≈4 ms (H200) a tick is located within about 10 ms.
  static constexpr std::chrono::nanoseconds kTickReadGap{2'000'000};
  // The longest wait for a tick, in counter periods: room to pass over a loosely bracketed one or two.
  static constexpr std::int64_t kTickWaitPeriods = 3;
  // J per step is said only over a window of which one counter tick is at most this share (100 ms ticks: 2 s).
  static constexpr double kMaxTickShare = 0.05;

  // `nvml_index`: the GPU the job runs on. Without NVML or an energy counter every call is a no-op and the
  // summary says why.
  explicit RunEnergy(unsigned nvml_index);

  // The feed reader, for every event while the runtime is live; `steady_ns`: std::chrono::steady_clock now;
  // `steps`: the runtime's step count (LiveRuntime::steps()) as of now.
  void on_live_event(std::int64_t steady_ns, std::uint64_t steps);

  // The counter, J, read only (safe from any thread): at its next tick when `at_tick` (monitor/counter_tick.hpp;
  // blocks up to kTickWaitPeriods counter periods, 300 ms on an H200, so never from the feed reader), else now, its time
  // uncertain by one counter period. nullopt without NVML or on a failed (first) read.
  std::optional<CounterAtTick> counter(bool at_tick) const;
  // The SM clock and the clock-event reasons now (safe from any thread); nullopt without NVML or when either read
  // fails.
  std::optional<ClockState> clocks() const;

  // One line for the exit summary: energy, seconds and mean power from the first to the last read at a step's
  // end, and J per step over the whole steps between them with its bound (one tick over the window); without J
  // per step and why over a window of which one tick is more than kMaxTickShare; "not measured" and why without
  // two reads.
  std::string summary() const;

 private:
  std::optional<std::uint64_t> read_mj() const;  // the counter, mJ; nullopt on a failed read
  void read(std::int64_t steady_ns, std::uint64_t steps);

  std::optional<gpu::OpenedGpus> gpus_;
  unsigned index_ = 0;
  std::string unavailable_;  // why there is no figure (empty: available)
  std::int64_t tick_ns_ = 0;  // the counter's update period (the GPU's spec)
  std::optional<std::uint64_t> seen_steps_;  // the step count at the previous event
  std::int64_t first_ns_ = -1, last_ns_ = -1;
  std::uint64_t first_mj_ = 0, last_mj_ = 0;
  std::uint64_t first_steps_ = 0, last_steps_ = 0;  // the step count at each read
};

}  // namespace gearshift::monitor
