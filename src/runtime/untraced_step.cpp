#include "runtime/untraced_step.hpp"

#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <map>
#include <unordered_map>
#include <unordered_set>
#include <utility>

namespace gearshift::runtime {

namespace {
// The median of `v` (upper middle for an even count); v non-empty, reordered.
template <typename T>
T median_of(std::vector<T>& v) {
  auto mid = v.begin() + static_cast<std::ptrdiff_t>(v.size() / 2);
  std::nth_element(v.begin(), mid, v.end());
  return *mid;
}
}  // namespace

std::optional<double> launches_per_step(const trace::Trace& t, const trace::IterationAnalysis& an) {
  if (an.iterations.size() < 2) return std::nullopt;
  const std::int64_t from = an.iterations.front().start_ns, to = an.iterations.back().start_ns;
  std::unordered_set<std::int64_t> launches;
  for (const auto& op : t.ops)
    // Kernels only: a copy's correlation is its copy call's, which the launch feed sends no L line for.
    if (op.kind == trace::OpKind::kernel && op.correlation >= 0 && op.start_ns >= from && op.start_ns < to)
      launches.insert(op.correlation);
  if (launches.empty()) return std::nullopt;
  return static_cast<double>(launches.size()) / static_cast<double>(an.iterations.size() - 1);
}

std::optional<std::string> step_anchor_name(const trace::Trace& t, const trace::IterationAnalysis& an) {
  if (an.iterations.size() < 2) return std::nullopt;
  auto counts = [&](const trace::OpRecord& r) {
    return r.device == an.device && r.kind == trace::OpKind::kernel && r.graph_id == 0;
  };
  auto first_of = [&](const trace::Iteration& it) {
    return std::lower_bound(t.ops.begin(), t.ops.end(), it.start_ns,
                            [](const trace::OpRecord& r, std::int64_t s) { return r.start_ns < s; });
  };
  // Per name, the steps that launched it exactly once: a name that misses a step or repeats in one falls short.
  std::unordered_map<std::uint32_t, std::size_t> in_step, steps_once;
  for (const trace::Iteration& it : an.iterations) {
    in_step.clear();
    for (auto r = first_of(it); r != t.ops.end() && r->start_ns < it.end_ns; ++r)
      if (counts(*r)) ++in_step[r->name_id];
    for (const auto& [name, n] : in_step) steps_once[name] += n == 1;
  }
  // The last such kernel of a step (ops are in start order).
  std::optional<std::string> last;
  const trace::Iteration& step = an.iterations.back();
  for (auto r = first_of(step); r != t.ops.end() && r->start_ns < step.end_ns; ++r)
    if (counts(*r) && steps_once[r->name_id] == an.iterations.size()) last = t.names[r->name_id];
  return last;
}

UntracedStep::UntracedStep(std::int64_t stop_ns, double launches_per_step, UntracedStepOptions o, bool anchored)
    : from_ns_(stop_ns + static_cast<std::int64_t>(o.settle_ns)), per_step_(launches_per_step), o_(o),
      anchored_(anchored) {
  if (!(launches_per_step > 0)) throw std::invalid_argument("UntracedStep: launches per step must be positive");
}

void UntracedStep::add_launch(std::int64_t cpu_ns, bool step_anchor) {
  if (cpu_ns < from_ns_ || times_.size() >= kMaxLaunches) return;  // memory stays bounded however long it waits
  if (anchored_ && step_anchor) ++anchors_;
  if (times_.empty() || cpu_ns < first_) first_ = cpu_ns;
  if (times_.empty() || cpu_ns > last_) last_ = cpu_ns;
  times_.push_back(cpu_ns);
  if (anchored_) is_anchor_.push_back(step_anchor);
}

void UntracedStep::add_sync(std::int64_t exit_ns) {
  if (exit_ns >= from_ns_ && syncs_.size() < kMaxLaunches) syncs_.push_back(exit_ns);
}

bool UntracedStep::anchored() const {
  if (!anchored_) return false;
  const double launches = static_cast<double>(times_.size());
  if (launches < per_step_ * static_cast<double>(o_.min_steps)) return true;  // too early to judge
  // Variants move launches per step by a tenth (Megatron-LM: 2,806 or 3,098); an anchor launched far less often
  // or far more than once a step here is not this window's step.
  const double per_anchor = launches / static_cast<double>(std::max<std::size_t>(1, anchors_));
  return per_anchor >= per_step_ / kAnchorSlack && per_anchor <= per_step_ * kAnchorSlack;
}

bool UntracedStep::done() const {
  if (anchored()) return anchors_ > o_.min_steps && window_ns() >= o_.min_window_ns;
  return times_.size() > 1 && window_ns() >= o_.min_window_ns &&
         static_cast<double>(times_.size() - 1) >= per_step_ * static_cast<double>(o_.min_steps);
}

double UntracedStep::period_ns() const {
  if (anchored()) return period_by_anchors_ns();
  const std::size_t k = std::max<std::size_t>(1, static_cast<std::size_t>(std::llround(per_step_)));
  if (times_.size() <= k) return 0;
  // The feed sends each launching thread's launches in batches (PyTorch launches the backward pass from its
  // autograd thread): in time order only once sorted.
  std::vector<std::int64_t> t = times_;
  std::sort(t.begin(), t.end());
  // The last tenth of the window may still lack another thread's batch: left out.
  const std::int64_t cut = last_ - (last_ - first_) / 10;
  t.erase(std::upper_bound(t.begin(), t.end(), cut), t.end());
  if (t.size() <= k) return 0;
  const double steps_in = static_cast<double>(t.size() - 1) / per_step_;  // steps of launches in the window
  // Each launch right after a synchronize is a point where the CPU had caught up with the GPU.
  std::vector<std::int64_t> y = syncs_;
  std::sort(y.begin(), y.end());
  std::vector<std::size_t> after;  // index in t of the first launch after each synchronize, ascending, distinct
  for (const std::int64_t s : y) {
    const auto i = static_cast<std::size_t>(std::upper_bound(t.begin(), t.end(), s) - t.begin());
    if (i < t.size() && (after.empty() || i != after.back())) after.push_back(i);
  }
  // Whole steps between two such points: index distance m steps of launches (within a launch, or 0.5 % of
  // them). The widest m found wins; the median of its pairs' spans over m is the step.
  std::size_t best_m = 0;
  std::vector<double> periods;
  for (const std::size_t a : after) {
    const auto max_m = static_cast<std::size_t>(static_cast<double>(t.size() - 1 - a) / per_step_);
    for (std::size_t m = max_m; m >= std::max<std::size_t>(1, best_m); --m) {
      const double target = static_cast<double>(a) + static_cast<double>(m) * per_step_;
      const double tol = std::max(1.0, 0.005 * static_cast<double>(m) * per_step_);
      const auto lo = std::lower_bound(after.begin(), after.end(), static_cast<std::size_t>(std::max(0.0, std::ceil(target - tol))));
      if (lo != after.end() && static_cast<double>(*lo) <= target + tol) {
        if (m > best_m) { best_m = m; periods.clear(); }
        periods.push_back(static_cast<double>(t[*lo] - t[a]) / static_cast<double>(m));
        break;
      }
      if (m == 1) break;
    }
  }
  if (best_m >= 2) return median_of(periods);
  // No whole steps between synchronizes: spans of half the window's steps (they average a step's bursts and
  // most of a CPU's run-ahead), the median over their starts.
  const auto m = std::max<std::size_t>(1, static_cast<std::size_t>(steps_in / 2));
  const auto span = static_cast<std::size_t>(std::llround(static_cast<double>(m) * per_step_));
  if (t.size() <= span) return 0;
  std::vector<std::int64_t> spans;
  spans.reserve(t.size() - span);
  for (std::size_t i = 0; i + span < t.size(); ++i) spans.push_back(t[i + span] - t[i]);
  return static_cast<double>(median_of(spans)) * per_step_ / static_cast<double>(span);
}

void UntracedStep::write(std::ostream& os) const {
  os << "# untraced window: from_ns " << from_ns_ << " launches_per_step " << per_step_ << " anchored "
     << anchored_ << " min_steps " << o_.min_steps << "\n";
  for (std::size_t i = 0; i < times_.size(); ++i)
    os << "L " << times_[i] << ' ' << (anchored_ && is_anchor_[i] ? 1 : 0) << '\n';
  for (const std::int64_t s : syncs_) os << "S " << s << '\n';
}

double UntracedStep::period_by_anchors_ns() const {
  // In time order, each launch marked when it is the anchor's; the window's last tenth left out as above.
  std::vector<std::pair<std::int64_t, bool>> t;
  t.reserve(times_.size());
  for (std::size_t i = 0; i < times_.size(); ++i) t.emplace_back(times_[i], is_anchor_[i]);
  std::sort(t.begin(), t.end());
  const std::int64_t cut = last_ - (last_ - first_) / 10;
  t.erase(std::upper_bound(t.begin(), t.end(), std::make_pair(cut, true)), t.end());
  std::vector<std::int64_t> anchors;
  std::vector<std::size_t> steps_before(t.size(), 0), since_anchor(t.size(), 0);
  std::size_t last_anchor = t.size();  // none yet
  // An anchor launch less than half a step's launches after the one counted before it starts no step: the same
  // kernel launched again outside the step's own work (a logging iteration's reductions, an evaluation) would
  // count a step that did not happen, and every step counted too many shortens the step measured.
  const double min_apart = per_step_ / 2;
  for (std::size_t i = 0; i < t.size(); ++i) {
    steps_before[i] = anchors.size();
    since_anchor[i] = last_anchor == t.size() ? 0 : i - last_anchor;
    if (t[i].second && (last_anchor == t.size() || static_cast<double>(i - last_anchor) >= min_apart))
      anchors.push_back(t[i].first), last_anchor = i;
  }
  if (anchors.size() < 3) return 0;
  const double per_step = static_cast<double>(t.size()) / static_cast<double>(anchors.size());
  const auto tol = static_cast<std::size_t>(std::max(1.0, 0.005 * per_step));
  // Launches right after a synchronize, as above; two at the same place in their steps (launches since the
  // anchor launch before each) are whole steps apart whatever variants the steps between ran.
  std::vector<std::int64_t> y = syncs_;
  std::sort(y.begin(), y.end());
  std::map<std::size_t, std::size_t> earliest;  // launches since the anchor -> the earliest such point (index)
  std::size_t best_m = 0;
  std::vector<double> periods;
  std::size_t prev = t.size();
  for (const std::int64_t s : y) {
    const auto b = static_cast<std::size_t>(
        std::upper_bound(t.begin(), t.end(), std::make_pair(s, true)) - t.begin());
    if (b >= t.size() || b == prev || steps_before[b] == 0) continue;
    prev = b;
    const std::size_t off = since_anchor[b];
    for (auto it = earliest.lower_bound(off > tol ? off - tol : 0); it != earliest.end() && it->first <= off + tol;
         ++it) {
      const std::size_t a = it->second, m = steps_before[b] - steps_before[a];
      if (m < 2 || m < best_m) continue;
      if (m > best_m) best_m = m, periods.clear();
      periods.push_back(static_cast<double>(t[b].first - t[a].first) / static_cast<double>(m));
    }
    earliest.emplace(off, b);  // kept only when the first at this place
  }
  if (best_m >= 2) return median_of(periods);
  // No whole steps between synchronizes: spans of half the window's anchor launches.
  const std::size_t k = std::max<std::size_t>(1, (anchors.size() - 1) / 2);
  std::vector<double> spans;
  for (std::size_t i = 0; i + k < anchors.size(); ++i)
    spans.push_back(static_cast<double>(anchors[i + k] - anchors[i]) / static_cast<double>(k));
  return median_of(spans);
}

}  // namespace gearshift::runtime
