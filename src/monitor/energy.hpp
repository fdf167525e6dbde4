// Pure arithmetic of energy measurement, kept apart from the sampler thread so that tests feed it exact numbers.
//
// NVML's total-energy counter (mJ) does not move continuously: it steps every update period (≈100 ms on H200,
// data/gpus/h200.json). Differencing two reads therefore errs by up to one period of energy at each end. The
// sampler instead locates a counter step ("tick") in time, by reading quickly after a window edge until the value
// changes, and extrapolates from that tick to the edge with the measured power:
//   E(edge) = E(tick) − P̄ · (t_tick − t_edge),
// so the error left is P̄'s error over at most one period, at each end.
#pragma once

#include <cstdint>
#include <deque>
#include <optional>

namespace gearshift::monitor {

using Ns = std::int64_t;  // std::chrono::steady_clock nanoseconds (CLOCK_MONOTONIC on Linux)

// Turns raw counter reads into a cumulative count that never goes back. A read below the previous one is a
// wrap: at 2^32 when the previous read fit in 32 bits (some drivers keep a 32-bit counter), else at 2^64.
class CounterUnwrapper {
 public:
  std::uint64_t add(std::uint64_t raw_mj);  // cumulative mJ since the first read
  int wraps() const { return wraps_; }

 private:
  bool has_ = false;
  std::uint64_t last_raw_ = 0, total_ = 0;
  int wraps_ = 0;
};

// One counter read: NVML answered somewhere inside [t_start, t_end].
struct CounterRead {
  Ns t_start = 0, t_end = 0;
  std::uint64_t cumulative_mj = 0;
};

// A counter step located between two reads.
struct Tick {
  Ns t_lo = 0, t_hi = 0;            // the step happened inside (t_lo, t_hi]
  std::uint64_t cumulative_mj = 0;  // value after the step
  Ns time() const { return t_lo + (t_hi - t_lo) / 2; }
  Ns uncertainty() const { return t_hi - t_lo; }
};

// The tick between two consecutive reads, if the value changed.
std::optional<Tick> detect_tick(const CounterRead& prev, const CounterRead& cur);

// Cumulative energy (mJ, on the tick's scale) at time t, from a tick and the mean power (W) between t and it.
double energy_at(const Tick& tick, double mean_power_w, Ns t);

// Trapezoid integral of power samples over time, for GPUs without a counter and windows shorter than its period.
struct PowerPoint {
  Ns t = 0;
  double watts = 0;
  double integral_j = 0;  // ∫P dt from the first sample to t, J
};
class PowerIntegrator {
 public:
  void add(Ns t, double watts);  // samples in time order; keeps the last `keep` points
  // ∫P dt up to time t, J: interpolated between samples, extrapolated at constant power outside them.
  std::optional<double> integral_at(Ns t) const;
  // Mean of the samples in [a, b]; if none lies there, the power of the sample nearest to a.
  std::optional<double> mean_power(Ns a, Ns b) const;
  const std::deque<PowerPoint>& points() const { return points_; }
  explicit PowerIntegrator(std::size_t keep = 4096) : keep_(keep) {}

 private:
  std::deque<PowerPoint> points_;
  std::size_t keep_;
};

}  // namespace gearshift::monitor
