// The run GPU's SM and memory clocks, sampled while `gearshift run --auto` collects its warm-up, so that the
// template's kernels carry the clocks they ran at, as a `gearshift trace` file's do (its tracer samples NVML every
// 10 ms beside CUPTI, into the same cupti::ClockTimeline). Without them the model takes the spec's sag for the
// GEMMs (H200: 1875 MHz) where the GPU may run them faster: Megatron-LM's GEMMs sampled at 1965 MHz (H200, session
// 24); planned from its trace at 647 W, unsampled clocks moved the MODELLED saving from 1.79 to 2.36 %
// (bench/results/2026-12-04-s25-template-copies.md, session 25).
// One thread of gearshift's own process reads NVML (read only) every period; the feed's times and these samples
// are both CLOCK_MONOTONIC.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <mutex>
#include <optional>
#include <thread>

#include "cupti/clock_timeline.hpp"
#include "trace/record.hpp"

namespace gearshift::service {

struct ClockReading {
  int sm_mhz = 0;   // current SM clock, MHz
  int mem_mhz = 0;  // current memory clock, MHz (0: not read)
};
// Reads the run GPU's clocks now; nullopt when the read failed. Called on the sampler's thread only.
using ReadClocks = std::function<std::optional<ClockReading>()>;

// Sets sm_clock_mhz and mem_clock_mhz of each op of `t` that has none (0) from the sample of device 0 in `clocks`
// nearest its midpoint (cupti::ClockTimeline::nearest), when that sample lies within `max_distance_ns` of it and
// read an SM clock (> 0). The samples' times must be on the ops' clock. Returns how many ops were set.
std::size_t attach_clocks(trace::Trace& t, const cupti::ClockTimeline& clocks, std::int64_t max_distance_ns);

class WarmupClocks {
 public:
  static constexpr std::int64_t kPeriodNs = 10'000'000;       // the tracer's default (GEARSHIFT_TRACE_SAMPLE_MS)
  static constexpr std::int64_t kMaxDistanceNs = 50'000'000;  // a kernel farther from every sample gets none
  static constexpr std::size_t kMaxSamples = std::size_t{1} << 17;  // the latest kept: 21 min at 10 ms

  // Starts sampling with `read` every `period_ns` (at least 1 ms) until stop().
  explicit WarmupClocks(ReadClocks read, std::int64_t period_ns = kPeriodNs);
  ~WarmupClocks();
  WarmupClocks(const WarmupClocks&) = delete;
  WarmupClocks& operator=(const WarmupClocks&) = delete;

  void stop();  // idempotent; the samples taken stay
  // attach_clocks with the samples so far, within kMaxDistanceNs (any thread); returns the ops set.
  std::size_t attach(trace::Trace& t) const { return attach_clocks(t, timeline_, kMaxDistanceNs); }
  std::size_t samples() const { return taken_.load(); }  // samples taken (the latest kMaxSamples are kept)

 private:
  void loop();
  ReadClocks read_;
  std::int64_t period_ns_;
  cupti::ClockTimeline timeline_{kMaxSamples};  // thread-safe
  std::atomic<std::size_t> taken_{0};
  std::mutex mu_;  // stop_
  std::condition_variable cv_;
  bool stop_ = false;
  std::thread thread_;
};

}  // namespace gearshift::service
