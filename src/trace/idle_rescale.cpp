#include "trace/idle_rescale.hpp"

#include <algorithm>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include <fmt/core.h>

namespace gearshift::trace {

std::vector<std::pair<double, double>> merged_intervals(std::vector<std::pair<double, double>> iv) {
  iv.erase(std::remove_if(iv.begin(), iv.end(), [](const auto& x) { return !(x.second > x.first); }), iv.end());
  std::sort(iv.begin(), iv.end());
  std::vector<std::pair<double, double>> merged;
  for (const auto& x : iv) {
    if (!merged.empty() && x.first <= merged.back().second)
      merged.back().second = std::max(merged.back().second, x.second);
    else
      merged.push_back(x);
  }
  return merged;
}

namespace {

// The busy intervals of one step, merged and sorted, within [0, period).
std::vector<std::pair<double, double>> busy_intervals(const IterationTemplate& t) {
  std::vector<std::pair<double, double>> iv;
  for (const auto& op : t.ops)
    iv.emplace_back(std::clamp(op.start_offset_ns, 0.0, t.period_ns),
                    std::clamp(op.start_offset_ns + op.duration_ns, 0.0, t.period_ns));
  return merged_intervals(std::move(iv));
}

// Idle time in [0, x) of a step (x in [0, period]).
double idle_before(const std::vector<std::pair<double, double>>& busy, double x) {
  double b = 0;
  for (const auto& [s, e] : busy) {
    if (s >= x) break;
    b += std::min(e, x) - s;
  }
  return x - b;
}

}  // namespace

double template_busy_ns(const IterationTemplate& t) {
  double b = 0;
  for (const auto& [s, e] : busy_intervals(t)) b += e - s;
  return b;
}

void rescale_idle(IterationTemplate& t, double step_ns) {
  if (!(step_ns > 0)) throw std::invalid_argument("rescale_idle: the step length must be positive");
  const auto busy = busy_intervals(t);
  double busy_ns = 0;
  for (const auto& [s, e] : busy) busy_ns += e - s;
  const double idle_ns = t.period_ns - busy_ns;
  if (step_ns < busy_ns)
    throw std::invalid_argument(fmt::format(
        "a step of {:.2f} ms is shorter than the {:.2f} ms its kernels and copies are busy in the template", step_ns / 1e6,
        busy_ns / 1e6));
  if (idle_ns <= 0) {
    if (step_ns == t.period_ns) return;
    throw std::invalid_argument(fmt::format("the template has no idle time to re-time to a {:.2f} ms step", step_ns / 1e6));
  }
  const double f = (step_ns - busy_ns) / idle_ns;
  // Maps a time of the step (any real: an op may start before 0 or end after the period) through the time map.
  auto map = [&](double x) { return x - (1 - f) * idle_before(busy, std::clamp(x, 0.0, t.period_ns)); };
  // Each op's gap: the idle time on its stream before it. The new gap keeps the part that lies in busy time of
  // other streams and scales the rest; the previous op on its stream (or, for the first, its last op one step
  // earlier) bounds it.
  std::map<std::int32_t, double> last_end;  // per stream: end of its last op in the step, old time
  for (const auto& op : t.ops) last_end[op.stream] = std::max(last_end[op.stream], op.start_offset_ns + op.duration_ns);
  std::map<std::int32_t, double> prev_end;
  std::vector<double> new_start(t.ops.size());
  for (std::size_t i = 0; i < t.ops.size(); ++i) {
    auto& op = t.ops[i];
    const double start = op.start_offset_ns;
    double idle_in_gap;
    if (auto p = prev_end.find(op.stream); p != prev_end.end()) {
      idle_in_gap = std::max(0.0, idle_before(busy, std::clamp(start, 0.0, t.period_ns)) -
                                      idle_before(busy, std::clamp(p->second, 0.0, t.period_ns)));
    } else {  // from its stream's last op of the previous step, across the step boundary
      const double from = std::clamp(last_end[op.stream], 0.0, t.period_ns);
      idle_in_gap = (idle_ns - idle_before(busy, from)) + idle_before(busy, std::clamp(start, 0.0, t.period_ns));
    }
    op.gap_before_ns = std::max(0.0, op.gap_before_ns - (1 - f) * std::min(op.gap_before_ns, idle_in_gap));
    new_start[i] = map(start);
    prev_end[op.stream] = std::max(prev_end.count(op.stream) ? prev_end[op.stream] : -1e300, start + op.duration_ns);
  }
  for (std::size_t i = 0; i < t.ops.size(); ++i) t.ops[i].start_offset_ns = new_start[i];
  // The CPU timeline through the same map: a launch-bound step's kernels start right after their launches (the
  // dependency-driven simulator starts a kernel no earlier than its launch), so the launches and the job's
  // synchronizes move with the idle time they bound.
  for (auto& op : t.ops)
    if (op.launch_known) op.launch_offset_ns = map(op.launch_offset_ns);
  for (auto& y : t.syncs) {
    const double end = map(y.enter_offset_ns + y.duration_ns);
    y.enter_offset_ns = map(y.enter_offset_ns);
    y.duration_ns = std::max(0.0, end - y.enter_offset_ns);
  }
  t.period_ns = step_ns;
}

}  // namespace gearshift::trace
