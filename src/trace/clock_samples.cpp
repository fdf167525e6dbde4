#include "trace/clock_samples.hpp"

#include <algorithm>

namespace gearshift::trace {

std::size_t attach_clock_samples(Trace& t, const std::vector<DeviceSample>& samples, std::int64_t max_distance_ns) {
  if (samples.empty()) return 0;
  std::size_t set = 0;
  for (OpRecord& op : t.ops) {
    if (op.sm_clock_mhz > 0) continue;
    const std::int64_t mid = op.start_ns + op.duration_ns / 2;
    auto after = std::lower_bound(samples.begin(), samples.end(), mid,
                                  [](const DeviceSample& s, std::int64_t x) { return s.time_ns < x; });
    auto best = after;
    if (after == samples.end() || (after != samples.begin() && mid - std::prev(after)->time_ns < after->time_ns - mid))
      best = std::prev(after);
    const std::int64_t distance = best->time_ns > mid ? best->time_ns - mid : mid - best->time_ns;
    if (distance > max_distance_ns || best->sm_clock_mhz <= 0) continue;
    op.sm_clock_mhz = best->sm_clock_mhz;
    op.mem_clock_mhz = best->mem_clock_mhz;
    ++set;
  }
  return set;
}

}  // namespace gearshift::trace
