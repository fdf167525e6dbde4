#include "cupti/clock_timeline.hpp"

#include <algorithm>

namespace gearshift::cupti {

ClockTimeline::ClockTimeline(std::size_t capacity) : capacity_(std::max<std::size_t>(1, capacity)) {}

void ClockTimeline::add(const trace::DeviceSample& s) {
  if (s.device < 0 || s.device > 1023) return;
  std::lock_guard lock(mu_);
  auto d = static_cast<std::size_t>(s.device);
  if (rings_.size() <= d) rings_.resize(d + 1);
  Ring& r = rings_[d];
  if (!r.buf.empty() && r.at(r.buf.size() - 1).time_ns > s.time_ns) return;
  if (r.buf.size() < capacity_) {
    r.buf.push_back(s);
  } else {
    r.buf[r.head] = s;
    r.head = (r.head + 1) % capacity_;
  }
}

std::optional<trace::DeviceSample> ClockTimeline::nearest(int device, std::int64_t time_ns) const {
  std::lock_guard lock(mu_);
  if (device < 0 || static_cast<std::size_t>(device) >= rings_.size()) return std::nullopt;
  const Ring& r = rings_[static_cast<std::size_t>(device)];
  if (r.buf.empty()) return std::nullopt;
  // Binary search for the first sample at or after time_ns, then pick the closer of it and its predecessor.
  std::size_t lo = 0, hi = r.buf.size();
  while (lo < hi) {
    std::size_t mid = (lo + hi) / 2;
    if (r.at(mid).time_ns < time_ns) lo = mid + 1;
    else hi = mid;
  }
  if (lo == r.buf.size()) return r.at(lo - 1);
  if (lo == 0) return r.at(0);
  const auto& after = r.at(lo);
  const auto& before = r.at(lo - 1);
  return (after.time_ns - time_ns) < (time_ns - before.time_ns) ? after : before;
}

}  // namespace gearshift::cupti
