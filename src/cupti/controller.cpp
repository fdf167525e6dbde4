#include "cupti/controller.hpp"

#include <algorithm>
#include <chrono>
#include <exception>

namespace gearshift::cupti {

Controller::Controller(Tracer* tracer, ClockSource* clocks, ControllerHooks hooks, std::int64_t sample_period_ns,
                       std::int64_t flush_period_ns, std::int64_t duration_ns, ActivityWindows windows,
                       bool activity_on)
    : tracer_(tracer),
      clocks_(clocks),
      hooks_(std::move(hooks)),
      sample_ns_(sample_period_ns),
      flush_ns_(flush_period_ns),
      duration_ns_(duration_ns),
      windows_(windows),
      activity_on_(activity_on),
      activity_every_(!windows.sampled()),
      start_ns_(hooks_.now_ns ? hooks_.now_ns() : 0) {
  thread_ = std::thread([this] { loop(); });
}

Controller::~Controller() { shutdown(); }

void Controller::shutdown() {
  {
    std::lock_guard lock(mu_);
    quit_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable() && thread_.get_id() != std::this_thread::get_id()) thread_.join();
}

ActivityWindows Controller::windows() const {
  std::lock_guard lock(mu_);
  return windows_;
}

void Controller::sample_now() {
  if (tracer_ == nullptr || clocks_ == nullptr || !hooks_.now_ns) return;
  for (int d = 0; d < clocks_->device_count(); ++d) {
    ClockReading r = clocks_->read(d);
    tracer_->add(trace::DeviceSample{d, hooks_.now_ns(), r.sm_clock_mhz, r.mem_clock_mhz, r.power_mw});
  }
}

void Controller::loop() {
  // Everything below calls into CUPTI/NVML and the writer: an exception must not end the process.
  try {
    using clock = std::chrono::steady_clock;
    using ns = std::chrono::nanoseconds;
    constexpr std::int64_t kMs = 1'000'000, kLongestTick = 50 * kMs;
    const auto tick = ns(std::max(kMs, sample_ns_ > 0 ? std::min(sample_ns_, kLongestTick) : kLongestTick));
    const auto far = clock::time_point::max();
    auto next_flush = flush_ns_ > 0 && hooks_.flush ? clock::now() + ns(flush_ns_) : far;
    auto next_sample = clock::now();
    // Kernel activity: on in every kernel's mode, else on only in the first window_ns of each period (from
    // `origin`); re-evaluated at next_toggle and whenever the runtime sends new windows.
    auto origin = clock::now();
    auto next_toggle = hooks_.kernel_activity ? origin : far;
    for (;;) {
      {
        std::unique_lock lock(mu_);
        auto wake = std::min({next_sample, next_flush, next_toggle, clock::now() + tick});
        if (cv_.wait_until(lock, wake, [this] { return quit_; })) return;
      }
      auto now = clock::now();
      if (hooks_.control) {
        const ControlPoll c = hooks_.control();
        if (c.off) {  // no more toggles or flushes: the off hook turns CUPTI off
          if (hooks_.off) hooks_.off();
          return;
        }
        if (c.windows && hooks_.kernel_activity) {
          std::lock_guard lock(mu_);
          windows_ = *c.windows;
          origin = now;
          next_toggle = now;
        }
      }
      if (now >= next_toggle) {
        bool want = true;
        next_toggle = far;
        if (windows_.sampled()) {
          const auto period = ns(windows_.period_ns);
          const auto period_start = origin + period * ((now - origin) / period);
          want = now < period_start + ns(windows_.window_ns);
          next_toggle = want ? period_start + ns(windows_.window_ns) : period_start + period;
          if (windows_.window_ns == 0) next_toggle = far;
        }
        // Also when only `every` changes while on (a sampled window open when every kernel is asked for, or the
        // reverse): copies and memsets follow every_kernel, not just `want`.
        const bool every = !windows_.sampled();
        if (want != activity_on_ || (want && every != activity_every_)) {
          hooks_.kernel_activity(want, every);
          if (want && !activity_on_) windows_opened_.fetch_add(1, std::memory_order_relaxed);
          activity_every_ = every;
          activity_on_ = want;
        }
      }
      if (sample_ns_ > 0 && now >= next_sample && !stopped_) {
        sample_now();
        next_sample += ns(sample_ns_);
        if (next_sample < now) next_sample = now + ns(sample_ns_);  // fell behind
      } else if (sample_ns_ <= 0 || stopped_) {
        next_sample = now + tick;
      }
      if (now >= next_flush) {
        hooks_.flush();
        next_flush = now + ns(flush_ns_);
      }
      if (tracer_ == nullptr || stopped_) continue;  // nothing (more) to stop: flushing for the runtime feed
      std::optional<std::string> reason = tracer_->stop_reason();
      if (!reason && duration_ns_ > 0 && hooks_.now_ns && hooks_.now_ns() - start_ns_ >= duration_ns_)
        reason = "traced for the requested duration";
      if (reason && !stopped_) {
        stopped_ = true;
        if (hooks_.stop) hooks_.stop(*reason);
        if (!hooks_.flush_after_stop) return;  // the trace is finished; the program runs on untraced
      }
    }
  } catch (...) {
    // Nothing to report to: the stop hook or exit handler finishes the file, marked incomplete if needed.
  }
}

}  // namespace gearshift::cupti
