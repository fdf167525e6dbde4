#include "runtime/scheduler.hpp"

#include <algorithm>
#include <cmath>
#include <string_view>
#include <unordered_map>

#include "model/kernel_class.hpp"

namespace gearshift::runtime {

namespace {
std::int64_t mod(std::int64_t a, std::int64_t n) { return ((a % n) + n) % n; }
std::int64_t floordiv(std::int64_t a, std::int64_t n) { return (a - mod(a, n)) / n; }
model::ClockPair max_of(const model::ClockPair& a, const model::ClockPair& b) {
  return {std::max(a.sm_mhz, b.sm_mhz), std::max(a.mem_mhz, b.mem_mhz)};
}
}  // namespace

ActuationScheduler::ActuationScheduler(const ClockPlan& plan, SchedulerOptions options)
    : plan_(plan), o_(options), changes_(plan.change_positions()), requested_(plan.default_clocks) {
  if (!o_.horizon_positions) o_.horizon_positions = static_cast<std::int64_t>(plan.size());
  // Positions repeat names (every layer's kernels): each name is classified once.
  std::unordered_map<std::string_view, bool> anchor_of;
  for (const auto& p : plan.positions) {
    auto [it, fresh] = anchor_of.try_emplace(p.name, false);
    if (fresh) it->second = model::classify(trace::OpKind::kernel, p.name) != model::KernelClass::communication;
    anchors_.push_back(it->second);
  }
}

void ActuationScheduler::plan_changed() {
  changes_ = plan_.change_positions();
  synced_ = false;
}

double ActuationScheduler::offset(std::int64_t abs) const {
  const auto n = static_cast<std::int64_t>(plan_.size());
  return static_cast<double>(floordiv(abs, n)) * plan_.period_ns +
         plan_.positions[static_cast<std::size_t>(mod(abs, n))].start_offset_ns;
}

model::ClockPair ActuationScheduler::clocks_at(std::int64_t abs) const {
  return plan_.positions[static_cast<std::size_t>(mod(abs, static_cast<std::int64_t>(plan_.size())))].clocks;
}

std::int64_t ActuationScheduler::next_change_at_or_after(std::int64_t abs) const {
  const auto n = static_cast<std::int64_t>(plan_.size());
  if (changes_.empty()) return INT64_MAX;
  const std::int64_t step = floordiv(abs, n);
  const auto p = static_cast<std::size_t>(mod(abs, n));
  auto it = std::lower_bound(changes_.begin(), changes_.end(), p);
  if (it != changes_.end()) return step * n + static_cast<std::int64_t>(*it);
  return (step + 1) * n + static_cast<std::int64_t>(changes_.front());
}

double ActuationScheduler::stale_after_ns() const {
  const double floor = kStaleSteps * plan_.period_ns;
  if (!(drift_ > 0)) return floor;
  return std::clamp(kStaleDriftNs / drift_, floor, std::max(floor, kStaleMaxNs));
}

double ActuationScheduler::duration(std::int64_t abs) const {
  return plan_.positions[static_cast<std::size_t>(mod(abs, static_cast<std::int64_t>(plan_.size())))].duration_ns;
}

std::optional<double> ActuationScheduler::estimate_start_ns(std::int64_t abs) const {
  if (anchor_abs_ < 0) return std::nullopt;
  return anchor_end_ns_ + (offset(abs) - (offset(anchor_abs_) + duration(anchor_abs_)));
}

bool ActuationScheduler::cpu_stalled(double now_ns) const {
  if (last_launch_cpu_ns_ < 0 || last_launch_ < 0 || anchor_abs_ < 0) return false;
  // The CPU's own pause after this position in the traced step (waiting for input, the step's end) is the
  // job's rhythm, not a stall: the template's offsets already hold it.
  const auto n = static_cast<std::int64_t>(plan_.size());
  const auto& a = plan_.positions[static_cast<std::size_t>(mod(last_launch_, n))];
  const auto& b = plan_.positions[static_cast<std::size_t>(mod(last_launch_ + 1, n))];
  double traced_gap = 0;
  if (a.launch_offset_ns && b.launch_offset_ns)
    traced_gap = std::max(0.0, *b.launch_offset_ns - *a.launch_offset_ns + (mod(last_launch_ + 1, n) == 0 ? plan_.period_ns : 0));
  // By the estimate the GPU finished every launched kernel kCpuStallNs ago and waits for the CPU.
  return now_ns > *estimate_start_ns(last_launch_) + duration(last_launch_) + kCpuStallNs &&
         now_ns - last_launch_cpu_ns_ > traced_gap + kCpuStallNs;
}

void ActuationScheduler::on_launch(std::int64_t abs, bool locked, std::int64_t cpu_ns) {
  if (!locked) {
    locked_ = false;
    synced_ = false;
    last_launch_cpu_ns_ = -1;
    return;
  }
  if (!locked_) synced_ = false;
  locked_ = true;
  if (cpu_ns >= 0) {
    const auto cpu = static_cast<double>(cpu_ns);
    // After a stall, the GPU finished what was launched (by the estimate) and waits: this kernel starts now.
    if (abs > last_launch_ && cpu_stalled(cpu)) anchor(abs, cpu + kLaunchToStartNs + duration(abs));
    last_launch_cpu_ns_ = cpu;
  }
  last_launch_ = std::max(last_launch_, abs);
  if (abs < last_launch_ - static_cast<std::int64_t>(plan_.size())) last_launch_ = abs;  // renumbered after relock
  if (abs == after_sync_abs_ && cpu_ns >= 0) {
    anchor_abs_ = abs;
    anchor_end_ns_ = std::max(static_cast<double>(cpu_ns), after_sync_exit_ns_) + kLaunchToStartNs + duration(abs);
  }
  if (abs >= after_sync_abs_) after_sync_abs_ = -1;
}

void ActuationScheduler::anchor(std::int64_t abs, double end_ns) {
  // The latest sign defines where the GPU is; an older one arriving late says nothing new.
  if (end_ns < anchor_end_ns_ && anchor_abs_ >= 0 && abs <= anchor_abs_) return;
  // How far the estimate had drifted from this sign, per ns it was extrapolated over (a moving average).
  if (anchor_abs_ >= 0 && abs > anchor_abs_ && end_ns - anchor_end_ns_ > kDriftMinSpanNs) {
    const double err = std::abs(end_ns - (*estimate_start_ns(abs) + duration(abs)));
    const double rate = err / (end_ns - anchor_end_ns_);
    drift_ = drift_ < 0 ? rate : drift_ + kDriftWeight * (rate - drift_);
  }
  anchor_abs_ = abs;
  anchor_end_ns_ = end_ns;
}

void ActuationScheduler::on_complete(std::int64_t abs, std::int64_t /*gpu_start_ns*/, std::int64_t gpu_end_ns) {
  if (abs < 0 || !o_.anchor_on_completions) return;
  if (!anchors_[static_cast<std::size_t>(mod(abs, static_cast<std::int64_t>(plan_.size())))]) return;
  anchor(abs, static_cast<double>(gpu_end_ns));
}

void ActuationScheduler::on_marker(std::int64_t abs, std::int64_t not_before_ns, std::int64_t seen_ns) {
  if (abs < 0 || !anchors_[static_cast<std::size_t>(mod(abs, static_cast<std::int64_t>(plan_.size())))]) return;
  anchor(abs, 0.5 * (static_cast<double>(std::min(not_before_ns, seen_ns)) + static_cast<double>(seen_ns)));
}

void ActuationScheduler::on_sync(std::int64_t abs, std::int64_t enter_ns, std::int64_t exit_ns) {
  if (abs < 0) return;
  const auto enter = static_cast<double>(enter_ns), exit = static_cast<double>(exit_ns);
  if (abs + 1 > last_launch_) {  // nothing launched since: the next launch finds the GPU idle
    after_sync_abs_ = abs + 1;
    after_sync_exit_ns_ = exit;
  }
  if (exit - enter >= kSyncWaitedNs) {
    anchor(abs, exit);  // it waited: the GPU finished abs as it returned
    return;
  }
  // The GPU was idle on entry: abs ended by then, at the estimate if that is earlier.
  double end = enter;
  if (anchor_abs_ >= 0) end = std::min(end, *estimate_start_ns(abs) + duration(abs));
  anchor(abs, end);
}

std::vector<ClockChange> ActuationScheduler::poll(std::int64_t now_ns) {
  std::vector<ClockChange> out;
  wakeup_.reset();
  const auto now = static_cast<double>(now_ns);
  // Stale (kStaleDriftNs): extrapolated too far from its anchor to time a boundary. A plan without a change has
  // nothing to time: never stale.
  const bool stale = !changes_.empty() && anchor_abs_ >= 0 && now > anchor_end_ns_ + stale_after_ns();
  if (!locked_ || anchor_abs_ < 0 || stale) {
    if (!requested_default_) {
      out.push_back({now_ns, now_ns, -1, plan_.default_clocks, true, false});
      requested_ = plan_.default_clocks;
      requested_default_ = true;
      ++stats_.issued;
    }
    synced_ = false;  // the next anchor sets the clocks of the phase it finds the GPU in (a phase may never end)
    return out;
  }
  // Poll again when the anchor goes stale, should nothing else happen by then.
  if (!changes_.empty())
    wakeup_ = std::max(now_ns + 1, static_cast<std::int64_t>(std::floor(anchor_end_ns_ + stale_after_ns())) + 1);
  const double L = o_.switch_latency_ns;
  if (!synced_) {
    // (Re)locked: skip boundaries that cannot be met and set the clocks of the phase the GPU will be in.
    std::int64_t c = next_change_at_or_after(anchor_abs_ + 1);
    while (c != INT64_MAX && *estimate_start_ns(c) < now + L) c = next_change_at_or_after(c + 1);
    cursor_ = c;
    synced_ = true;
    model::ClockPair want = c == INT64_MAX ? clocks_at(anchor_abs_ + 1) : clocks_at(c - 1);
    if (requested_default_ || !(want == requested_)) {
      out.push_back({now_ns, static_cast<std::int64_t>(now + L), c == INT64_MAX ? -1 : c - 1, want, false, false});
      requested_ = want;
      requested_default_ = false;
      ++stats_.issued;
    }
  }
  const std::int64_t limit = cpu_stalled(now) ? last_launch_ : last_launch_ + *o_.horizon_positions;
  while (cursor_ != INT64_MAX && cursor_ <= limit) {
    const double land = *estimate_start_ns(cursor_);
    if (now < land - L) {
      const auto at = static_cast<std::int64_t>(std::ceil(land - L));
      wakeup_ = wakeup_ ? std::min(*wakeup_, at) : at;
      break;
    }
    // Merge the boundaries that follow within the minimum interval; the span keeps the highest clocks.
    model::ClockPair want = clocks_at(cursor_);
    std::int64_t next = next_change_at_or_after(cursor_ + 1);
    while (next != INT64_MAX && *estimate_start_ns(next) - land < o_.min_interval_ns) {
      want = max_of(want, clocks_at(next));
      ++stats_.merged;
      next = next_change_at_or_after(next + 1);
    }
    const bool late = now + L > land + o_.late_tolerance_ns;
    const bool raises = want.sm_mhz > requested_.sm_mhz || want.mem_mhz > requested_.mem_mhz;
    if (late && !raises) {
      ++stats_.dropped;
    } else if (!(want == requested_) || requested_default_) {
      out.push_back({now_ns, static_cast<std::int64_t>(land), cursor_, want, false, late});
      requested_ = want;
      requested_default_ = false;
      ++stats_.issued;
      if (late) ++stats_.late;
    }
    cursor_ = next;
  }
  return out;
}

}  // namespace gearshift::runtime
