// Reading NVML's total-energy counter at one of its ticks, for a window's edges that must be exact.
//
// The counter steps every energy_counter_update_ms of the GPU's spec (100 ms on an H200, data/gpus/h200.json), so
// the difference of two plain reads errs by up to one period of energy at each end: over the 1-3 s in which
// `run --auto` measures the untraced step, up to 10 % of the power its plan is calibrated to (H200, 2026-12-03:
// gradient accumulation refused at 539 W, planned at 569 W, its own figure 561 W). Read until the value steps,
// the read lands on a tick whose time is known to within the reads around it (one read took ≈4 ms on an H200,
// DESIGN.md): the energy between two ticks is the counter's own, and only the ticks' times err.
// The same idea as the sampler's located edges (monitor/energy.hpp), for a caller that reads once and waits.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>

#include "monitor/energy.hpp"

namespace gearshift::monitor {

// One read of the counter, placed in time.
struct CounterAtTick {
  Ns t_ns = 0;            // when the value was current: the tick's time when located, else the read's, steady ns
  Ns uncertainty_ns = 0;  // how far t_ns may be from when the value was current: the bracket's width when located,
                          // one counter period when not
  double j = 0;           // the counter, J
  bool located = false;   // the read landed on a tick (false: the counter did not step within the wait)
};

// How the counter is read: injectable, so that tests drive a clock of their own.
struct CounterSource {
  std::function<std::optional<std::uint64_t>()> read_mj;  // the raw counter, mJ; nullopt on a failed read
  std::function<Ns()> now_ns;                              // steady clock, ns
  std::function<void(Ns)> sleep_ns;                        // waits this long
};

// How long and how closely to wait for a tick. A tick lies between the start of the last read that showed the
// old value and the end of the first read that showed the new one; one bracketed more loosely than
// max_bracket_ns (the reading thread was descheduled, or a read stalled) is passed over for the next one, up to
// max_passed_over times. Before, the first read that saw the change dated the tick, and on a loaded 2-core CI
// machine a late read moved a calibration pair's power by several % (2026-12-03).
struct TickWait {
  Ns period_ns = 100'000'000;      // the counter's update period (the GPU's spec), ns
  Ns gap_ns = 1'000'000;           // between reads, ns
  Ns max_bracket_ns = 12'000'000;  // two reads (~4 ms each on an H200, DESIGN.md) and the gap, with room
  int max_passed_over = 20;        // then a loose tick is taken, its bracket as its uncertainty
  Ns max_wait_ns = 0;              // 0: until a tick; else after this long the latest loose tick, or the last
                                   // read (not located), stands
  std::function<bool()> stop;      // asked before each read (empty: never): true ends the wait, nothing read
};

// Reads the counter until its value steps (TickWait above): the value after the step, at the middle of the
// bracket. nullopt, with the reason in `*error` when given, on a failed read or a stop.
std::optional<CounterAtTick> read_at_tick(const CounterSource& src, const TickWait& wait, std::string* error = nullptr);

// Mean power between two reads, W, and its bound as a fraction: half of both ends' uncertainty over the window.
struct WindowPower {
  double watts = 0;
  double error = 0;  // fraction of `watts`
  double seconds = 0;
  bool located = false;  // both ends on ticks
};
// nullopt when the window is not positive or the energy did not rise.
std::optional<WindowPower> window_power(const CounterAtTick& from, const CounterAtTick& to);

}  // namespace gearshift::monitor
