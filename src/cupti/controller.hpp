// The tracer's own thread: samples clocks and power every `sample_period_ns`, asks CUPTI to flush its
// buffers every `flush_period_ns`, turns kernel activity on for the first `window_ns` of every `period_ns`
// (sampled activity for the runtime feed: CUPTI's per-kernel cost only inside the windows), ends when the
// runtime turns the feed off, and stops the trace once the tracer says so (steps reached, record cap, write
// error) or `duration_ns` has passed. It never runs on the application's threads.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <string>
#include <optional>
#include <thread>

#include "cupti/clock_source.hpp"
#include "cupti/tracer.hpp"

namespace gearshift::cupti {

struct ControllerHooks {
  std::function<std::int64_t()> now_ns;             // the trace's clock (cuptiGetTimestamp), ns
  std::function<void()> flush;                      // cuptiActivityFlushAll(0); may be empty
  std::function<void(const std::string&)> stop;     // stop tracing with this reason; called at most once
  bool flush_after_stop = false;  // keep flushing after the stop (the runtime feed still needs activity)
  // Kernel activity records on/off; `every_kernel`: on for every kernel (the windows are not sampled), so that
  // the feed records copies and memsets too (for planning only, not for sampled GPU progress). May be empty.
  std::function<void(bool on, bool every_kernel)> kernel_activity = {};
  // The runtime's commands (feed_control.hpp), polled every tick; may be empty.
  std::function<struct ControlPoll()> control = {};
  // The runtime turned the feed off: called once, on the controller's thread, which then ends; may be empty.
  std::function<void()> off = {};
};

// Sampled kernel activity: on for the first `window_ns` of every `period_ns`. Not sampled (period_ns = 0, or
// window_ns >= period_ns): always on. window_ns = 0 < period_ns: off.
struct ActivityWindows {
  std::int64_t period_ns = 0;
  std::int64_t window_ns = 0;
  bool sampled() const { return period_ns > 0 && window_ns < period_ns; }
};

// What one poll of the runtime's commands asked for.
struct ControlPoll {
  std::optional<ActivityWindows> windows;  // new activity windows, if any
  bool off = false;                        // the feed off for good: the controller calls the off hook and ends
};

class Controller {
 public:
  // `tracer` may be null (the runtime feed without a trace file: periodic flushes only); `clocks` may be null
  // (no sampling); both must outlive the controller.
  // `windows`: the kernel activity to keep (with the kernel_activity hook); `activity_on`: whether the caller
  // left kernel activity on.
  // Periods and the duration in ns; 0: no sampling, no periodic flush, no time limit.
  Controller(Tracer* tracer, ClockSource* clocks, ControllerHooks hooks, std::int64_t sample_period_ns,
             std::int64_t flush_period_ns, std::int64_t duration_ns, ActivityWindows windows = {},
             bool activity_on = true);
  ~Controller();  // shutdown()
  Controller(const Controller&) = delete;
  Controller& operator=(const Controller&) = delete;

  // Ends the thread (without calling stop). Safe to call twice and from any thread but the controller's.
  void shutdown();
  // Takes one sample of every device now (also used at the start and the end of a trace).
  void sample_now();

  // Times kernel activity was turned on by the windows (a window that opens while it is on is not counted).
  std::uint64_t windows_opened() const { return windows_opened_.load(std::memory_order_relaxed); }
  // The activity windows in force (changed by the control hook).
  ActivityWindows windows() const;

 private:
  void loop();

  Tracer* tracer_;
  ClockSource* clocks_;
  ControllerHooks hooks_;
  std::int64_t sample_ns_, flush_ns_, duration_ns_;
  ActivityWindows windows_;  // guarded by mu_ for windows(); written by the controller thread only
  bool activity_on_;
  bool activity_every_;  // the last kernel_activity call's every_kernel (at construction: the windows not sampled)
  std::int64_t start_ns_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  bool quit_ = false;
  bool stopped_ = false;
  std::atomic<std::uint64_t> windows_opened_{0};
  std::thread thread_;
};

}  // namespace gearshift::cupti
