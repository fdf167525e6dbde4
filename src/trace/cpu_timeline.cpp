#include "trace/cpu_timeline.hpp"

#include <algorithm>
#include <limits>
#include <map>
#include <optional>

#include <fmt/format.h>

namespace gearshift::trace {
namespace {

constexpr std::int64_t kNone = std::numeric_limits<std::int64_t>::max();

// Each step's CPU window starts at the earliest launch of its ops on the analysed device (kNone: none known).
std::vector<std::int64_t> first_launches(const Trace& trace, const IterationAnalysis& a) {
  const auto& its = a.iterations;
  std::vector<std::int64_t> first(its.size(), kNone);
  for (const auto& r : trace.ops) {
    if (r.device != a.device || r.launch_ns < 0) continue;
    auto k = std::upper_bound(its.begin(), its.end(), r.start_ns,
                              [](std::int64_t v, const Iteration& it) { return v < it.start_ns; });
    if (k == its.begin()) continue;
    std::size_t idx = static_cast<std::size_t>(k - its.begin()) - 1;
    if (idx + 1 == its.size() && r.start_ns >= its[idx].start_ns + static_cast<std::int64_t>(a.tmpl.period_ns)) continue;
    first[idx] = std::min(first[idx], r.launch_ns);
  }
  return first;
}

// The end of step k's CPU window: the next step's first launch, or one period on.
std::int64_t window_end(const IterationAnalysis& a, const std::vector<std::int64_t>& first, std::size_t k) {
  return k + 1 < first.size() && first[k + 1] != kNone ? first[k + 1]
                                                       : first[k] + static_cast<std::int64_t>(a.tmpl.period_ns);
}

bool on_device(const SyncRecord& y, int device) { return y.device < 0 || y.device == device; }

// What a synchronize entered at x may wait for: the latest end of the work launched before x. Built from
// (launch, end) pairs, sorted by launch with each end raised to the latest so far. T: ns, integer (the trace) or
// laid out (the template).
template <typename T>
class LatestEndByLaunch {
 public:
  void add(T launch, T end) { v_.emplace_back(launch, end); }
  void finish() {
    std::sort(v_.begin(), v_.end());
    for (std::size_t i = 1; i < v_.size(); ++i) v_[i].second = std::max(v_[i].second, v_[i - 1].second);
  }
  std::optional<T> before(T x) const {
    auto it = std::lower_bound(v_.begin(), v_.end(), x, [](const auto& p, T v) { return p.first < v; });
    if (it == v_.begin()) return std::nullopt;
    return std::prev(it)->second;
  }
  std::optional<T> first_launch() const { return v_.empty() ? std::nullopt : std::optional<T>(v_.front().first); }

 private:
  std::vector<std::pair<T, T>> v_;
};

// Steps of equal length: the steps' i-th synchronizes, by their offsets in the step.
void place_by_order(const Trace& trace, IterationAnalysis& a, const std::vector<std::int64_t>& first_launch) {
  IterationTemplate& t = a.tmpl;
  const auto& its = a.iterations;
  std::map<std::size_t, std::vector<std::vector<const SyncRecord*>>> by_count;  // syncs per step -> their syncs
  std::map<std::size_t, std::vector<std::size_t>> steps_by_count;  // the same steps' indices
  std::size_t regular = 0;
  for (std::size_t k = 0; k < its.size(); ++k) {
    if (!its[k].regular || first_launch[k] == kNone) continue;
    ++regular;
    const std::int64_t from = first_launch[k];
    const std::int64_t to = window_end(a, first_launch, k);
    std::vector<const SyncRecord*> mine;
    for (const auto& y : trace.syncs)
      if (y.enter_ns >= from && y.enter_ns < to && on_device(y, a.device)) mine.push_back(&y);
    steps_by_count[mine.size()].push_back(k);
    by_count[mine.size()].push_back(std::move(mine));
  }
  if (regular == 0) {
    t.cpu_note = "no regular step has launch events";
    return;
  }
  auto best = std::max_element(by_count.begin(), by_count.end(),
                               [](const auto& x, const auto& y) { return x.second.size() < y.second.size(); });
  if (2 * best->second.size() <= regular) {
    t.cpu_note = fmt::format("the regular steps call different numbers of synchronizes (most common: {} in {} of {} "
                             "steps): the CPU is taken never to wait",
                             best->first, best->second.size(), regular);
    return;
  }
  const auto& steps = best->second;
  const auto& ks = steps_by_count[best->first];
  for (std::size_t i = 0; i < best->first; ++i) {
    TemplateSync s;
    s.scope = steps[0][i]->scope;
    s.stream = steps[0][i]->scope == SyncRecord::Scope::stream ? steps[0][i]->stream : -1;
    double enter = 0, dur = 0;
    for (std::size_t q = 0; q < steps.size(); ++q) {
      enter += static_cast<double>(steps[q][i]->enter_ns - its[ks[q]].start_ns);
      dur += static_cast<double>(steps[q][i]->duration_ns);
      if (steps[q][i]->scope != s.scope || steps[q][i]->stream != steps[0][i]->stream) s.stream = -1;
    }
    s.enter_offset_ns = enter / static_cast<double>(steps.size());
    s.duration_ns = dur / static_cast<double>(steps.size());
    s.samples = static_cast<std::uint32_t>(steps.size());
    t.syncs.push_back(s);
  }
  t.syncs_known = true;
  t.cpu_note = fmt::format("{} synchronize(s) per step, from {} of {} regular steps", t.syncs.size(), steps.size(), regular);
}

// A synchronize of unequal steps, by where it falls in the CPU's launches: after the `anchor`-th main-stream
// position's launch (-1: before the step's first), the `order`-th after it.
struct SyncSite {
  std::int64_t anchor = -1;
  std::uint32_t order = 0;
  bool operator<(const SyncSite& o) const { return anchor != o.anchor ? anchor < o.anchor : order < o.order; }
};
struct SiteStats {
  std::uint32_t steps = 0;   // steps that called it
  double lead_ns = 0;        // sum of (entered - the anchor's launch)
  std::uint32_t waited = 0;  // steps where work launched before it was still running when it was entered
  double return_ns = 0;      // sum over those of (returned - that work's end)
  double own_ns = 0;         // sum over the others of its duration
  SyncRecord::Scope scope = SyncRecord::Scope::device;
  std::int32_t stream = -1;
};

// Steps of unequal length: synchronizes placed by the launch before them (trace/cpu_timeline.hpp).
void place_by_position(const Trace& trace, IterationAnalysis& a, const std::vector<std::int64_t>& first_launch,
                       const std::vector<StepLaunches>& steps) {
  IterationTemplate& t = a.tmpl;
  // The template's main-stream positions in order: its laid-out starts grow with the position, and the sort by
  // start that built t.ops is stable.
  std::vector<std::size_t> main_op;
  for (std::size_t i = 0; i < t.ops.size(); ++i)
    if (t.ops[i].stream == t.main_stream) main_op.push_back(i);
  LatestEndByLaunch<std::int64_t> launched;  // the device's work in the trace
  for (const auto& r : trace.ops)
    if (r.device == a.device && r.launch_ns >= 0) launched.add(r.launch_ns, r.end_ns());
  launched.finish();
  std::map<SyncSite, SiteStats> sites;
  std::size_t used = 0;
  for (const StepLaunches& s : steps) {
    if (s.step >= first_launch.size() || first_launch[s.step] == kNone || s.launches.empty()) continue;
    ++used;
    const std::int64_t from = first_launch[s.step];
    const std::int64_t to = window_end(a, first_launch, s.step);
    auto y = std::lower_bound(trace.syncs.begin(), trace.syncs.end(), from,
                              [](const SyncRecord& r, std::int64_t v) { return r.enter_ns < v; });
    SyncSite last{-2, 0};
    for (; y != trace.syncs.end() && y->enter_ns < to; ++y) {
      if (!on_device(*y, a.device)) continue;
      auto after = std::upper_bound(s.launches.begin(), s.launches.end(), y->enter_ns,
                                    [](std::int64_t v, const auto& l) { return v < l.first; });
      SyncSite site;
      site.anchor = after == s.launches.begin() ? -1 : static_cast<std::int64_t>(std::prev(after)->second);
      site.order = site.anchor == last.anchor ? last.order + 1 : 0;
      last = site;
      SiteStats& st = sites[site];
      if (st.steps == 0) st.scope = y->scope, st.stream = y->scope == SyncRecord::Scope::stream ? y->stream : -1;
      if (y->scope != st.scope || y->stream != st.stream) st.stream = -1;
      ++st.steps;
      st.lead_ns += static_cast<double>(y->enter_ns - (after == s.launches.begin() ? from : std::prev(after)->first));
      const auto end = launched.before(y->enter_ns);
      if (end && *end > y->enter_ns) {
        ++st.waited;
        st.return_ns += static_cast<double>(std::clamp<std::int64_t>(y->exit_ns() - *end, 0, y->duration_ns));
      } else {
        st.own_ns += static_cast<double>(y->duration_ns);
      }
    }
  }
  if (used == 0) {
    t.cpu_note = "no regular step has launch events";
    return;
  }
  LatestEndByLaunch<double> laid;  // the template's work, laid out
  for (const auto& o : t.ops)
    if (o.launch_known) laid.add(o.launch_offset_ns, o.start_offset_ns + o.duration_ns);
  laid.finish();
  const double first_laid = laid.first_launch().value_or(0.0);
  auto launch_of = [&](std::int64_t pos) -> std::optional<double> {
    if (pos < 0 || static_cast<std::size_t>(pos) >= main_op.size() || !t.ops[main_op[static_cast<std::size_t>(pos)]].launch_known)
      return std::nullopt;
    return t.ops[main_op[static_cast<std::size_t>(pos)]].launch_offset_ns;
  };
  std::size_t rare = 0, unplaced = 0;
  for (const auto& [site, st] : sites) {
    if (2 * st.steps <= used) {
      rare += st.steps;
      continue;
    }
    const std::optional<double> base = site.anchor < 0 ? std::optional<double>(first_laid) : launch_of(site.anchor);
    if (!base) {
      unplaced += st.steps;
      continue;
    }
    // After its anchor's launch and before the next main-stream launch, as in every step that called it.
    double enter = *base + std::max(1.0, st.lead_ns / st.steps);
    if (const auto next = launch_of(site.anchor + 1); next && *next > *base + 1.0) enter = std::min(enter, *next - 0.5);
    TemplateSync s;
    s.scope = st.scope;
    s.stream = st.stream;
    s.enter_offset_ns = enter;
    s.samples = st.steps;
    const std::optional<double> awaited = laid.before(enter);
    if (2 * st.waited > st.steps && awaited)
      s.duration_ns = std::max(enter, *awaited) + st.return_ns / st.waited - enter;
    else
      s.duration_ns = st.steps > st.waited ? st.own_ns / (st.steps - st.waited) : 0.0;
    t.syncs.push_back(s);
  }
  std::stable_sort(t.syncs.begin(), t.syncs.end(),
                   [](const TemplateSync& x, const TemplateSync& y) { return x.enter_offset_ns < y.enter_offset_ns; });
  t.syncs_known = true;
  t.cpu_note = fmt::format(
      "{} synchronize(s) per step, placed by the main-stream launch before each (the steps differ in length), from "
      "{} regular steps",
      t.syncs.size(), used);
  if (rare + unplaced > 0)
    t.cpu_note += fmt::format("; {:.1f} per step left out ({:.1f} where fewer than half the steps call them, {:.1f} "
                              "after a position whose launch is not known)",
                              static_cast<double>(rare + unplaced) / static_cast<double>(used),
                              static_cast<double>(rare) / static_cast<double>(used),
                              static_cast<double>(unplaced) / static_cast<double>(used));
}

}  // namespace

void attach_cpu_timeline(const Trace& trace, IterationAnalysis& a, const std::vector<StepLaunches>* by_position) {
  IterationTemplate& t = a.tmpl;
  t.syncs.clear();
  t.syncs_known = false;
  const std::size_t known = static_cast<std::size_t>(
      std::count_if(t.ops.begin(), t.ops.end(), [](const TemplateOp& o) { return o.launch_known; }));
  if (t.ops.empty() || known == 0) {
    const bool any = std::any_of(trace.ops.begin(), trace.ops.end(), [](const OpRecord& r) { return r.launch_ns >= 0; });
    t.cpu_note = any ? "the template's ops know no launch in every step that ran them"
                     : "the trace has no launch events (CPU launch calls by correlation id)";
    return;
  }
  if (a.method == "optimizer updates" && by_position == nullptr) {
    t.cpu_note = "the steps differ in length: their synchronizes are not placed, the CPU is taken never to wait";
    return;
  }
  if (!trace.syncs_recorded) {
    t.cpu_note = "the trace does not record the job's synchronizes: the CPU is taken never to wait";
    return;
  }
  const std::vector<std::int64_t> first = first_launches(trace, a);
  if (by_position != nullptr)
    place_by_position(trace, a, first, *by_position);
  else
    place_by_order(trace, a, first);
}

}  // namespace gearshift::trace
