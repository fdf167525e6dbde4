#include "cupti/controller.hpp"

#include <algorithm>
#include <chrono>
#include <exception>

namespace gearshift::cupti {

Controller::Controller(Tracer* tracer, ClockSource* clocks, ControllerHooks hooks, int sample_period_ms,
                       int flush_period_ms, double duration_s)
    : tracer_(tracer),
      clocks_(clocks),
      hooks_(std::move(hooks)),
      sample_ms_(sample_period_ms),
      flush_ms_(flush_period_ms),
      duration_s_(duration_s),
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
    const auto tick = std::chrono::milliseconds(std::max(1, sample_ms_ > 0 ? std::min(sample_ms_, 50) : 50));
    auto next_flush = clock::now() + std::chrono::milliseconds(flush_ms_);
    auto next_sample = clock::now();
    for (;;) {
      {
        std::unique_lock lock(mu_);
        if (cv_.wait_until(lock, std::min(next_sample, clock::now() + tick), [this] { return quit_; })) return;
      }
      auto now = clock::now();
      if (sample_ms_ > 0 && now >= next_sample && !stopped_) {
        sample_now();
        next_sample += std::chrono::milliseconds(sample_ms_);
        if (next_sample < now) next_sample = now + std::chrono::milliseconds(sample_ms_);  // fell behind
      } else if (sample_ms_ <= 0 || stopped_) {
        next_sample = now + tick;
      }
      if (flush_ms_ > 0 && now >= next_flush && hooks_.flush) {
        hooks_.flush();
        next_flush = now + std::chrono::milliseconds(flush_ms_);
      }
      if (tracer_ == nullptr || stopped_) continue;  // nothing (more) to stop: flushing for the runtime feed
      std::optional<std::string> reason = tracer_->stop_reason();
      if (!reason && duration_s_ > 0 && hooks_.now_ns &&
          static_cast<double>(hooks_.now_ns() - start_ns_) >= duration_s_ * 1e9)
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
