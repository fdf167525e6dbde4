#include "runtime/runtime_core.hpp"

#include <algorithm>
#include <limits>
#include <string>

#include <fmt/core.h>

namespace gearshift::runtime {

namespace {
constexpr std::size_t kRing = 1 << 16;  // correlations remembered until their activity record arrives
constexpr std::size_t kRecent = 256;     // launches a synchronize may be queued behind (other threads' launches)

std::vector<std::string> names_of(const ClockPlan& p) {
  std::vector<std::string> v;
  for (const auto& x : p.positions) v.push_back(x.name);
  return v;
}
}  // namespace

RuntimeCore::RuntimeCore(const ClockPlan& plan, SchedulerOptions options, PredictorOptions predictor)
    : plan_(plan),
      pred_(names_of(plan_), predictor),
      sched_(plan_, options),
      latency_ns_(options.switch_latency_ns),
      corr_pos_(kRing, {-1, -1}),
      landings_{{-std::numeric_limits<double>::infinity(), plan_.default_clocks}},
      issued_(kRing, {-1, 0.0}) {
  for (const auto& p : plan_.positions) plan_kernel_ns_ += p.duration_ns;
}

Alignment RuntimeCore::on_launch(std::string_view name, std::int64_t correlation, std::int64_t cpu_ns) {
  const std::int64_t expected = pred_.next_position();
  return placed(pred_.observe(name), expected, correlation, cpu_ns);
}

Alignment RuntimeCore::on_launch(std::int32_t id, model::KernelClass cls, std::int64_t correlation, std::int64_t cpu_ns) {
  const std::int64_t expected = pred_.next_position();
  return placed(pred_.observe(id, cls), expected, correlation, cpu_ns);
}

Alignment RuntimeCore::placed(const Alignment& a, std::int64_t expected, std::int64_t correlation, std::int64_t cpu_ns) {
  const auto n = static_cast<std::int64_t>(pred_.size());
  const bool locked = a.state == PredictorState::locked;
  sched_.on_launch(a.position, locked, cpu_ns);
  if (recent_.size() >= kRecent) recent_.erase(recent_.begin(), recent_.begin() + kRecent / 2);
  recent_.emplace_back(correlation, locked && (a.matched || a.substituted) ? a.position : -1);
  ++stats_.launches;
  if (locked) {
    if (first_abs_ < 0) first_abs_ = a.position;
    last_abs_ = std::max(last_abs_, a.position);
  }
  if (expected >= 0 && first_abs_ >= 0 && expected >= first_abs_ + n) {
    ++stats_.scored;
    if ((a.matched || a.substituted) && a.position == expected) ++stats_.predicted;
  }
  if (correlation >= 0)
    corr_pos_[static_cast<std::size_t>(correlation) % kRing] = {correlation,
                                                                a.matched || a.substituted ? a.position : -1};
  return a;
}

void RuntimeCore::on_sync(std::int64_t correlation, std::int64_t enter, std::int64_t exit) {
  ++stats_.syncs;
  std::int64_t abs = -1;
  for (auto it = recent_.rbegin(); it != recent_.rend(); ++it)
    if (it->first < correlation) {
      abs = it->second;
      break;
    }
  sched_.on_sync(abs, enter, exit);
}

void RuntimeCore::on_marker(std::int64_t correlation, std::int64_t not_before, std::int64_t seen) {
  ++stats_.markers;
  const auto& slot = corr_pos_[static_cast<std::size_t>(std::max<std::int64_t>(correlation, 0)) % kRing];
  if (slot.first != correlation || slot.second < 0) return;
  sched_.on_marker(slot.second, not_before, seen);
}

void RuntimeCore::on_complete(std::int64_t correlation, std::int64_t start, std::int64_t end) {
  const auto& slot = corr_pos_[static_cast<std::size_t>(std::max<std::int64_t>(correlation, 0)) % kRing];
  if (slot.first != correlation || slot.second < 0) return;
  const std::int64_t abs = slot.second;
  sched_.on_complete(abs, start, end);
  if (const auto& b = issued_[static_cast<std::size_t>(abs) % kRing]; b.first == abs) {
    if (stats_.boundary_error_ns.size() < kMaxBoundaryErrors)
      stats_.boundary_error_ns.push_back(static_cast<float>(static_cast<double>(start) - b.second));
  }
  const auto n = static_cast<std::int64_t>(pred_.size());
  if (first_abs_ < 0 || abs < first_abs_ + n || end <= start) return;
  const auto at = static_cast<std::size_t>(abs % n);
  const double s = static_cast<double>(start), t = static_cast<double>(end);
  const bool before_fallback = stats_.fell_back && s < fallback_from_ns_;  // ran before the runtime acted on it
  const auto& want = before_fallback ? phase_clocks_[at] : plan_.positions[at].clocks;
  double in_time = 0;
  auto it = std::upper_bound(landings_.begin(), landings_.end(), s, [](double x, const auto& seg) { return x < seg.first; });
  for (auto k = static_cast<std::size_t>(it - landings_.begin()) - 1; k < landings_.size() && landings_[k].first < t; ++k) {
    const double lo = std::max(s, landings_[k].first);
    const double hi = k + 1 < landings_.size() ? std::min(t, landings_[k + 1].first) : t;
    if (hi > lo && landings_[k].second == want) in_time += hi - lo;
  }
  stats_.kernel_ns += t - s;
  stats_.in_time_ns += in_time;
  if (before_fallback) {
    stats_.kernel_ns_before_fallback += t - s;
    stats_.in_time_ns_before_fallback += in_time;
  }
  if (plan_.in_time_fallback && !stats_.fell_back) guard(s);
}

std::uint64_t RuntimeCore::steps() const {
  const auto n = static_cast<std::int64_t>(pred_.size());
  return first_abs_ < 0 ? 0 : static_cast<std::uint64_t>(last_abs_ / n - first_abs_ / n + 1);
}

void RuntimeCore::guard(double start_ns) {
  const std::uint64_t now = steps();
  auto start_window = [&] {
    window_step_ = now;
    window_kernel_ns_ = stats_.kernel_ns;
    window_in_time_ns_ = stats_.in_time_ns;
  };
  // landings_[0] is the default clocks since always; [1] the plan's first change.
  if (landings_.size() < 2 || start_ns < landings_[1].first) return start_window();  // the plan has not begun
  const double kernel = stats_.kernel_ns - window_kernel_ns_, in_time = stats_.in_time_ns - window_in_time_ns_;
  if (now < window_step_ + kGuardWindowSteps || kernel < kGuardMinKernelSteps * plan_kernel_ns_) return;
  ++stats_.guard_windows;
  if (in_time >= kMinInTime * kernel) return start_window();  // this window held: the next one starts here
  stats_.fell_back = true;
  stats_.fell_back_at_step = now;
  stats_.fell_back_window_steps = now - window_step_;
  stats_.fell_back_window_in_time = in_time / kernel;
  stats_.kernel_ns_before_fallback = stats_.kernel_ns;
  stats_.in_time_ns_before_fallback = stats_.in_time_ns;
  phase_clocks_.clear();
  for (auto& p : plan_.positions) phase_clocks_.push_back(p.clocks), p.clocks = *plan_.in_time_fallback;
  sched_.plan_changed();
}

std::vector<ClockChange> RuntimeCore::poll(std::int64_t now_ns) {
  if (stats_.fell_back && fallback_from_ns_ == std::numeric_limits<double>::infinity())
    fallback_from_ns_ = static_cast<double>(now_ns);
  std::vector<ClockChange> out = sched_.poll(now_ns);
  for (const auto& c : out) {
    landings_.emplace_back(static_cast<double>(now_ns) + latency_ns_, c.clocks);
    if (c.position >= 0) issued_[static_cast<std::size_t>(c.position) % kRing] = {c.position, static_cast<double>(c.boundary_ns)};
  }
  return out;
}

LiveStats RuntimeCore::stats() const {
  LiveStats s = stats_;
  const auto& st = sched_.stats();
  s.changes = st.issued;
  s.dropped = st.dropped;
  s.merged = st.merged;
  s.late = st.late;
  s.losses = pred_.losses();
  s.steps = steps();
  return s;
}

std::string describe_boundary_errors(std::vector<float> errors_ns) {
  if (errors_ns.empty()) return "no change boundary timed by kernel activity";
  std::sort(errors_ns.begin(), errors_ns.end());
  auto q = [&](double f) { return errors_ns[static_cast<std::size_t>(f * static_cast<double>(errors_ns.size() - 1))] / 1e6; };
  return fmt::format("{} change boundaries timed by kernel activity: kernel start minus the estimate the change was "
                     "issued for median {:+.2f} ms, 10-90 % [{:+.2f}, {:+.2f}] ms",
                     errors_ns.size(), q(0.5), q(0.1), q(0.9));
}

}  // namespace gearshift::runtime
