#include "runtime/runtime_core.hpp"

#include <algorithm>
#include <cstdint>
#include <numeric>
#include <limits>
#include <string>

#include <fmt/core.h>

namespace gearshift::runtime {

namespace {
constexpr std::size_t kRing = 1 << 16;  // correlations remembered until their activity record arrives
constexpr std::size_t kRecent = 256;     // launches a synchronize may be queued behind (other threads' launches)

// The order the CPU launches the positions in, which is what the predictor sees: by their launch offset (one
// traced step's launch times) when every position has one, else the plan's. The plan's order is the GPU's: ops
// of two streams start there in another order than they were launched (Megatron-LM: a gradient stream beside the
// compute stream; its 140-iteration trace replayed in GPU order had 16 % of the launches 1-4 positions off what
// the predictor expected, 0.1 % in launch order).
std::vector<std::size_t> launch_order(const ClockPlan& p) {
  std::vector<std::size_t> order(p.positions.size());
  std::iota(order.begin(), order.end(), std::size_t{0});
  if (std::all_of(p.positions.begin(), p.positions.end(), [](const auto& x) { return x.launch_offset_ns.has_value(); }))
    std::stable_sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) {
      return *p.positions[a].launch_offset_ns < *p.positions[b].launch_offset_ns;
    });
  return order;
}

std::vector<std::string> names_of(const ClockPlan& p, const std::vector<std::size_t>& order) {
  std::vector<std::string> v;
  for (std::size_t i : order) v.push_back(p.positions[i].name);
  return v;
}

// The plan's variants over the launch order: an insertion follows its position's launch; a skip is kept when its
// positions are launched one after another. An alternative whose skipped positions are not launched right after
// its anchor is followed as its two halves, an insertion and a skip (its insertion alone when they are not
// launched one after another).
std::vector<VariantBlock> variants_of(const ClockPlan& p, const std::vector<std::size_t>& order) {
  std::vector<std::int64_t> at(order.size());
  for (std::size_t k = 0; k < order.size(); ++k) at[order[k]] = static_cast<std::int64_t>(k);
  std::vector<VariantBlock> v;
  for (const auto& x : p.variants) {
    VariantBlock b{x.after < 0 ? -1 : at[static_cast<std::size_t>(x.after)], {}, 0};
    for (const auto& op : x.ops) b.names.push_back(op.first);
    if (x.skip > 0) {
      std::int64_t lo = INT64_MAX, hi = -1;
      for (std::size_t i = static_cast<std::size_t>(x.after + 1); i <= static_cast<std::size_t>(x.after) + x.skip; ++i)
        lo = std::min(lo, at[i]), hi = std::max(hi, at[i]);
      if (hi - lo + 1 == static_cast<std::int64_t>(x.skip)) {
        if (b.names.empty() || b.after == lo - 1) {
          b.after = lo - 1;
          b.skip = x.skip;
        } else {
          v.push_back({lo - 1, {}, x.skip});
        }
      }
    }
    if (!b.names.empty() || b.skip > 0) v.push_back(std::move(b));
  }
  return v;
}
}  // namespace

RuntimeCore::RuntimeCore(const ClockPlan& plan, SchedulerOptions options, PredictorOptions predictor)
    : plan_(plan),
      order_(launch_order(plan_)),
      pred_(names_of(plan_, order_), predictor, variants_of(plan_, order_)),
      sched_(plan_, options),
      latency_ns_(options.switch_latency_ns),
      corr_pos_(kRing),
      landings_{{-std::numeric_limits<double>::infinity(), plan_.default_clocks}},
      issued_(kRing, {-1, 0.0}),
      plan_kernel_ns_(plan_.kernel_ns_per_step()) {}

std::int64_t RuntimeCore::to_plan(std::int64_t abs) const {
  if (abs < 0) return abs;
  const auto n = static_cast<std::int64_t>(order_.size());
  return abs / n * n + static_cast<std::int64_t>(order_[static_cast<std::size_t>(abs % n)]);
}

Alignment RuntimeCore::on_launch(std::string_view name, std::int64_t correlation, std::int64_t cpu_ns) {
  const std::int64_t expected = next_position();
  return placed(pred_.observe(name), expected, correlation, cpu_ns);
}

Alignment RuntimeCore::on_launch(std::int32_t id, model::KernelClass cls, std::int64_t correlation, std::int64_t cpu_ns) {
  const std::int64_t expected = next_position();
  return placed(pred_.observe(id, cls), expected, correlation, cpu_ns);
}

Alignment RuntimeCore::placed(Alignment a, std::int64_t expected, std::int64_t correlation, std::int64_t cpu_ns) {
  const auto n = static_cast<std::int64_t>(pred_.size());
  const bool locked = a.state == PredictorState::locked;
  // By name only: a locked predictor takes unknown kernels of a class as substitutes for a while (the fake job's
  // tail of other kernels walked on through 2 more steps so).
  if (locked && a.matched && !a.variant && a.position >= 0) {  // launch order: the step's last launches
    const std::int64_t step = a.position / n, at = a.position % n;
    if (step > completed_step_ && at >= n - std::max<std::int64_t>(1, n / 10)) {
      ++complete_steps_;
      completed_step_ = step;
    }
  }
  if (locked) a.position = to_plan(a.position);
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
    if (a.expected) ++stats_.predicted;
  }
  if (correlation >= 0)
    corr_pos_[static_cast<std::size_t>(correlation) % kRing] = {correlation,
                                                                a.matched || a.substituted ? a.position : -1, a.variant};
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
  const Placed& slot = corr_pos_[static_cast<std::size_t>(std::max<std::int64_t>(correlation, 0)) % kRing];
  if (slot.correlation != correlation || slot.abs < 0 || slot.variant) return;
  sched_.on_marker(slot.abs, not_before, seen);
}

void RuntimeCore::on_complete(std::int64_t correlation, std::int64_t start, std::int64_t end) {
  const Placed& slot = corr_pos_[static_cast<std::size_t>(std::max<std::int64_t>(correlation, 0)) % kRing];
  if (slot.correlation != correlation || slot.abs < 0) return;
  const std::int64_t abs = slot.abs;
  // An inserted launch of a step variant runs at its position's clocks but is not that position's kernel: its
  // end would anchor the template's timing wrongly.
  if (!slot.variant) sched_.on_complete(abs, start, end);
  if (const auto& b = issued_[static_cast<std::size_t>(abs) % kRing]; !slot.variant && b.first == abs) {
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

bool RuntimeCore::set_position_clocks(const std::vector<model::ClockPair>& clocks) {
  if (stats_.fell_back || clocks.size() != plan_.positions.size()) return false;
  for (std::size_t i = 0; i < clocks.size(); ++i) plan_.positions[i].clocks = clocks[i];
  sched_.plan_changed();
  return true;
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
  s.steps = complete_steps_;
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
