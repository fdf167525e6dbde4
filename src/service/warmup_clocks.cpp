#include "service/warmup_clocks.hpp"

#include <algorithm>
#include <chrono>
#include <vector>

#include "runtime/live.hpp"
#include "trace/clock_samples.hpp"

namespace gearshift::service {

WarmupClocks::WarmupClocks(ReadClocks read, std::int64_t period_ns)
    : read_(std::move(read)), period_ns_(std::max<std::int64_t>(period_ns, 1'000'000)) {
  if (read_) thread_ = std::thread([this] { loop(); });
}

WarmupClocks::~WarmupClocks() { stop(); }

void WarmupClocks::stop() {
  {
    std::lock_guard lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

void WarmupClocks::loop() {
  std::unique_lock lock(mu_);
  while (!stop_) {
    lock.unlock();
    std::optional<ClockReading> r;
    try {
      r = read_();
    } catch (...) {  // a reader that throws reads nothing; the warm-up goes on without its clocks
    }
    const std::int64_t now = runtime::monotonic_ns();
    lock.lock();
    if (r && r->sm_mhz > 0) {
      trace::DeviceSample s;
      s.time_ns = now;
      s.sm_clock_mhz = r->sm_mhz;
      s.mem_clock_mhz = r->mem_mhz;
      samples_.push_back(s);
      if (samples_.size() > kMaxSamples) samples_.pop_front();
    }
    cv_.wait_for(lock, std::chrono::nanoseconds(period_ns_), [this] { return stop_; });
  }
}

std::size_t WarmupClocks::attach(trace::Trace& t) const {
  std::vector<trace::DeviceSample> s;
  {
    std::lock_guard lock(mu_);
    s.assign(samples_.begin(), samples_.end());
  }
  return trace::attach_clock_samples(t, s, kMaxDistanceNs);
}

std::size_t WarmupClocks::samples() const {
  std::lock_guard lock(mu_);
  return samples_.size();
}

}  // namespace gearshift::service
