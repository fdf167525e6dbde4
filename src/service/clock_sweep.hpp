// `gearshift calibrate`'s sweep (service/calibrate.hpp), on its own thread while the job runs: a warm-up at the
// reference pair (locked before the job started) until steps are detected, then each clock pair in turn: lock,
// settle, and measure a window of whole energy-counter ticks (NVML's counter, ~100 ms on an H200) with the
// kernels that ran inside it. The feed reader hands it the followed process's events through SweepFeed.
#pragma once

#include <atomic>
#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "feed/protocol.hpp"
#include "gpu/nvml.hpp"
#include "model/calibration_sweep.hpp"
#include "runtime/feed_collector.hpp"
#include "service/progress.hpp"
#include "sim/calibration_model.hpp"
#include "trace/iteration.hpp"

namespace gearshift::service {

// Resets the clocks this command locked, once (the sweep's end, an error, the job ending first).
class ClockGuard {
 public:
  // `sink`: where a failed reset is said (service/progress.hpp).
  ClockGuard(gpu::Device dev, bool memory, ProgressSink sink = {})
      : dev_(dev), memory_(memory), sink_(std::move(sink)) {}
  ~ClockGuard() { reset(); }
  void touched() { touched_ = true; }
  void reset() {
    if (!touched_) return;
    touched_ = false;
    if (auto r = dev_.reset_locked_sm_clocks(); !r) report(r.error(), "SM");
    if (memory_)
      if (auto r = dev_.reset_locked_mem_clocks(); !r) report(r.error(), "memory");
  }

 private:
  void report(const gpu::NvmlError& e, const char* which) const;
  gpu::Device dev_;
  bool memory_;
  ProgressSink sink_;
  bool touched_ = false;
};

struct SweepKernel {
  std::string name;
  std::int64_t start_ns, end_ns;  // CLOCK_MONOTONIC
};

// What the feed reader shares with the sweep thread.
struct SweepFeed {
  std::mutex mu;
  // The followed process's kernels (and copies and memsets, the feed's Y lines), for step detection and the
  // board-power fit, as a traced file's ops are.
  runtime::FeedCollector warmup{2'000'000};
  std::unordered_map<std::int64_t, std::string> pending;  // correlation -> name of a launch not completed
  std::unordered_map<std::int64_t, std::string> graph_names;  // N lines: a graph kernel's name id -> name
  std::vector<SweepKernel> done;                           // completed kernels, arrival order
  std::atomic<bool> job_ended{false};
  std::atomic<bool> sweep_over{false};  // the job runs on past the sweep: nothing more is kept

  // The feed reader: one event of the followed process (a no-op once the sweep is over).
  void add(const feed::FeedEvent& e);
};

struct SweepResult {
  trace::Trace trace;                // the warm-up at the reference pair (what the workload is built from)
  trace::IterationAnalysis steps;
  std::vector<sim::PairMeasurement> pairs;
  std::vector<std::map<std::string, std::pair<std::int64_t, std::size_t>>> durations;  // per pair: name -> (sum ns, n)
  std::string error;                 // empty: complete
  // Switch latencies measured at each lock (service/clock_sweep.cpp), ms: lowerings and raisings of the SM clock.
  std::vector<double> switch_down_ms, switch_up_ms;
  std::size_t switches_unreached = 0;  // locks whose clock the sampled SM clock did not show within 1 s
};

struct SweepOptions {
  std::size_t warmup_steps = 10, settle_steps = 2, steps_per_pair = 10;
  // Each pair's window lasts at least this long, ns: a tick's instant is known to about ±5 ms on H200 (a read
  // takes ~4 ms), which is ≤ 1 % of the power over 1 s.
  std::int64_t min_window_ns = 1'000'000'000;
  std::int64_t timeout_ns = 600'000'000'000;
  ProgressSink progress_sink;  // one line per measured pair (service/progress.hpp); empty: none
};

// The sweep (the calling thread): returns when every pair is measured, the job ended, or past o.timeout_ns; the
// locked clocks are reset through `guard` before it returns.
SweepResult sweep(SweepFeed& sh, const gpu::Device& dev, bool lock_memory, ClockGuard& guard,
                  const std::vector<model::ClockPair>& pairs, const SweepOptions& o);

}  // namespace gearshift::service
