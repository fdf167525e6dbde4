// One live run's assembly, for `gearshift run` and the Python runtime alike: options → Session (actuators,
// the GPU's lock, the watchdog, optionally an in-process feed pipe and its reader) → start(plan) → events →
// stop() → stats. The faces only parse their arguments, feed events and print; the policy (what is checked
// before a clock is touched, what is restored in which order) is here, once. docs/runtime.md "Session".
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <stdexcept>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "feed/protocol.hpp"
#include "gpu/nvml.hpp"
#include "runtime/actuator.hpp"
#include "runtime/clock_plan.hpp"
#include "runtime/live.hpp"
#include "runtime/safety.hpp"
#include "runtime/scheduler.hpp"

namespace gearshift::runtime {

// Why a session could not be assembled. The faces map the kind once: to an exit code (cli/main.cpp's
// codes) or to a Python exception class (gearshift._errors).
class SessionError : public std::runtime_error {
 public:
  enum class Kind {
    kBadOutput,     // the dry-run log cannot be written
    kNoGpu,         // NVML missing or failing, or no GPU of that index
    kNoPermission,  // NVML refuses this user, or this process may not lock clocks (not root, no CAP_SYS_ADMIN)
    kGpuBusy,       // another gearshift holds the GPU's lock (what() names its pid and the lock file)
    kFailure,       // the lock file or the watchdog could not be made
  };
  SessionError(Kind kind, const std::string& message) : std::runtime_error(message), kind_(kind) {}
  Kind kind() const noexcept { return kind_; }

 private:
  Kind kind_;
};

struct SessionOptions {
  bool apply = false;        // lock clocks through NVML; false: dry-run (the intended changes go to the log only)
  unsigned gpu = 0;          // NVML index of the GPU to lock (apply); all GPUs, CUDA_VISIBLE_DEVICES not applied
  bool lock_memory = false;  // also lock memory clocks where the GPU supports it (apply)
  std::string dry_run_log;   // intended changes, one JSON line each (dry-run, and apply's fallback); "" keeps none
  // An executable with gearshift's `_watchdog` subcommand (apply): resets the clocks if this process dies
  // without restoring them (kill -9). Empty: no watchdog, with a warning on stderr (clocks stay locked then).
  std::string watchdog_exe;
  bool record_changes = false;  // keep every intended change in memory (changes()): `run --timeline`
  bool pipe_feed = false;       // a pipe for feed lines (feed_fd()), read by the session's own reader thread
};

struct SessionStats {
  bool started = false;               // a plan ran (start() was called)
  LiveStats live;                     // the runtime's figures; zero when it never started
  bool wrote_clocks = false;          // clocks were locked through NVML to the end (false: dry-run or fell back)
  std::uint64_t dry_run_changes = 0;  // changes the dry-run actuator recorded (dry-run, or after a fallback)
};

class Session {
 public:
  // Opens the dry-run log; with apply: NVML's GPU `gpu`, checks that this process may lock clocks, takes the
  // GPU's lock and starts the watchdog, in that order; with pipe_feed: the pipe and its reader. Nothing is
  // applied before start(). Throws SessionError.
  explicit Session(SessionOptions options);
  ~Session();  // stop()
  Session(const Session&) = delete;
  Session& operator=(const Session&) = delete;

  // Starts the runtime on `plan` (its kernel positions; live.hpp): from now on events reach it. Once; any
  // thread (`run --auto` starts it from the planner's thread). Throws std::logic_error when called twice or
  // after stop().
  void start(const ClockPlan& plan, const SchedulerOptions& options);
  // The runtime once started, until stop(); nullptr otherwise. Any thread.
  LiveRuntime* live() const noexcept { return live_.load(); }
  // Hand one event (line) to the runtime: false before start, after stop, or (line) when it is not a valid
  // event. Any thread; never throw.
  bool feed(const feed::FeedEvent& e) noexcept;
  bool feed_line(std::string_view line) noexcept;
  // The write end of the feed pipe (pipe_feed), -1 otherwise. Closed by stop(). Lines written before start()
  // are dropped.
  int feed_fd() const noexcept { return write_fd_; }

  const SessionOptions& options() const noexcept { return o_; }
  // True while it locks clocks through NVML (apply, and NVML did not refuse a change); false after stop().
  bool writes_clocks() const noexcept { return !stopped_.load() && act_->writes_clocks(); }
  // Clock changes NVML failed to make other than for permission (a GPU lost, an invalid clock); 0 in a dry run.
  std::uint64_t failed_changes() const { return nvml_act_ ? nvml_act_->failures() : 0; }
  // record_changes: every intended change so far, in order; lost: some could not be kept (out of memory).
  std::vector<ClockChange> changes() const;
  bool changes_lost() const;

  // Ends the run, idempotent: closes the feed pipe and joins its reader (every line written is handled), stops
  // the runtime (default clocks restored), tells the watchdog the clocks are restored, releases the lock and
  // closes the dry-run log. Returns the same stats when called again.
  SessionStats stop();

 private:
  void read_loop();

  SessionOptions o_;
  std::unique_ptr<DryRunActuator> dry_;
  std::shared_ptr<const gpu::Nvml> nvml_;
  std::unique_ptr<GpuLock> lock_;
  std::unique_ptr<Watchdog> watchdog_;
  std::unique_ptr<NvmlActuator> nvml_act_;
  std::unique_ptr<RecordingActuator> recorder_;
  Actuator* act_ = nullptr;  // the outermost of the above
  std::unique_ptr<LiveRuntime> rt_;
  std::atomic<LiveRuntime*> live_{nullptr};
  std::atomic<bool> stopped_{false};
  SessionStats stats_;
  int read_fd_ = -1, write_fd_ = -1;
  std::thread reader_;
};

}  // namespace gearshift::runtime
