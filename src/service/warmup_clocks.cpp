#include "service/warmup_clocks.hpp"

#include <algorithm>
#include <chrono>

#include "runtime/live.hpp"

namespace gearshift::service {

std::size_t attach_clocks(trace::Trace& t, const cupti::ClockTimeline& clocks, std::int64_t max_distance_ns) {
  std::size_t set = 0;
  for (trace::OpRecord& op : t.ops) {
    if (op.sm_clock_mhz > 0) continue;
    const std::int64_t mid = op.start_ns + op.duration_ns / 2;
    const std::optional<trace::DeviceSample> s = clocks.nearest(0, mid);
    if (!s || s->sm_clock_mhz <= 0 || std::max(s->time_ns - mid, mid - s->time_ns) > max_distance_ns) continue;
    op.sm_clock_mhz = s->sm_clock_mhz;
    op.mem_clock_mhz = s->mem_clock_mhz;
    ++set;
  }
  return set;
}

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
    if (r && r->sm_mhz > 0) {
      timeline_.add(trace::DeviceSample{0, runtime::monotonic_ns(), r->sm_mhz, r->mem_mhz, -1});
      ++taken_;
    }
    lock.lock();
    cv_.wait_for(lock, std::chrono::nanoseconds(period_ns_), [this] { return stop_; });
  }
}

}  // namespace gearshift::service
