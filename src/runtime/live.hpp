// The live runtime: launch and activity events come in from any thread (the feed reader, or a CUPTI callback)
// and are only queued there; a dedicated runtime thread runs the predictor and the scheduler and calls the
// actuator, so the launch thread never waits on a clock change. Times are CLOCK_MONOTONIC ns. What it does with
// the events is RuntimeCore's (runtime_core.hpp), which `gearshift replay` drives in virtual time.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "runtime/actuator.hpp"
#include "runtime/clock_plan.hpp"
#include "runtime/runtime_core.hpp"
#include "runtime/scheduler.hpp"

namespace gearshift::runtime {

std::int64_t monotonic_ns() noexcept;

class LiveRuntime {
 public:
  // Follows `plan.kernels_only()`: launch events are kernel launches (feed.hpp), so the plan's memcpy/memset
  // positions are left out of the template.
  LiveRuntime(const ClockPlan& plan, SchedulerOptions options, Actuator& actuator);
  ~LiveRuntime();
  LiveRuntime(const LiveRuntime&) = delete;
  LiveRuntime& operator=(const LiveRuntime&) = delete;

  // Cheap, thread-safe, never throw (may be called from a CUDA callback).
  void on_launch(std::string_view name, std::int64_t correlation, std::int64_t cpu_ns) noexcept;
  void on_complete(std::int64_t correlation, std::int64_t gpu_start_ns, std::int64_t gpu_end_ns) noexcept;
  // A device/stream synchronize the job called (feed.hpp's S line): every kernel launched before it (smaller
  // correlation) had finished when it returned.
  void on_sync(std::int64_t correlation, std::int64_t enter_ns, std::int64_t exit_ns) noexcept;
  // A stream marker after the kernel launched with `correlation` (feed.hpp's M line): it ended between
  // `not_before_ns` and `seen_ns`.
  void on_marker(std::int64_t correlation, std::int64_t not_before_ns, std::int64_t seen_ns) noexcept;
  // From now on completed kernels anchor the estimate (or stop doing so): `gearshift run` turns this on when
  // it asks the job for every kernel's activity because the job does not synchronize.
  void set_anchor_on_completions(bool on) noexcept;
  // RuntimeCore::set_position_clocks on the runtime thread (queued like an event): the plan's positions (kernels
  // only, as followed) get these clocks. Any thread.
  void set_position_clocks(std::vector<model::ClockPair> clocks) noexcept;
  // Whether the predictor follows the job's steps (locked) as of the last launch handled: any thread.
  bool locked() const noexcept { return locked_.load(std::memory_order_relaxed); }
  // Whether a sign of GPU progress anchored the runtime, as of its last poll (then a plan of one clock pair has
  // had it requested, if locked): any thread.
  bool anchored() const noexcept { return anchored_.load(std::memory_order_relaxed); }
  // RuntimeCore::complete_steps() as of the last launch handled: any thread. It rises when the first of a step's
  // last launches is placed, so a reader that sees it rise stands at the same point of every whole step (in launch
  // time), and work that is no whole step (an evaluation, a job's exit) never moves it.
  std::uint64_t steps() const noexcept { return steps_.load(std::memory_order_relaxed); }
  // RuntimeCore::fell_back() as of the last completion handled: any thread.
  bool fell_back() const noexcept { return fell_back_.load(std::memory_order_relaxed); }

  // Stops the thread after it handled every queued event, restores the default clocks, returns the figures.
  LiveStats stop();

 private:
  struct Event {
    enum class Kind { launch, complete, sync, marker, anchor_on_completions, position_clocks } kind;
    // launch: a = cpu_ns; complete: start, end; sync: entered, returned; marker: not yet, seen; a: on
    std::int64_t correlation, a, b;
    std::string name;
    std::vector<model::ClockPair> clocks;  // position_clocks
  };
  void push(Event e) noexcept;
  void loop();
  void handle(Event& e);

  Actuator& act_;
  RuntimeCore core_;  // kernel positions only; runtime thread
  std::mutex mu_;
  std::condition_variable cv_;
  std::vector<Event> queue_;
  bool stopping_ = false;
  std::thread thread_;
  LiveStats stats_;
  std::atomic<bool> locked_{false};
  std::atomic<bool> anchored_{false};
  std::atomic<std::uint64_t> steps_{0};
  std::atomic<bool> fell_back_{false};
  bool stopped_ = false;
};

}  // namespace gearshift::runtime
