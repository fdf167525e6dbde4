#include "trace/cpu_timeline.hpp"

#include <algorithm>
#include <limits>
#include <map>

#include <fmt/format.h>

namespace gearshift::trace {

void attach_cpu_timeline(const Trace& trace, IterationAnalysis& a) {
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
  if (a.method == "optimizer updates") {
    // Steps of unequal length: the template's offsets are laid out from mean durations and gaps (launches keep
    // their lead on their ops), and a synchronize's offset in one step would not fit them.
    t.cpu_note = "the steps differ in length: their synchronizes are not placed, the CPU is taken never to wait";
    return;
  }
  if (!trace.syncs_recorded) {
    t.cpu_note = "the trace does not record the job's synchronizes: the CPU is taken never to wait";
    return;
  }
  // Each regular step's CPU window [first launch, next step's first launch).
  const auto& its = a.iterations;
  std::vector<std::int64_t> first_launch(its.size(), std::numeric_limits<std::int64_t>::max());
  for (const auto& r : trace.ops) {
    if (r.device != a.device || r.launch_ns < 0) continue;
    auto k = std::upper_bound(its.begin(), its.end(), r.start_ns,
                              [](std::int64_t v, const Iteration& it) { return v < it.start_ns; });
    if (k == its.begin()) continue;
    std::size_t idx = static_cast<std::size_t>(k - its.begin()) - 1;
    if (idx + 1 == its.size() && r.start_ns >= its[idx].start_ns + static_cast<std::int64_t>(t.period_ns)) continue;
    first_launch[idx] = std::min(first_launch[idx], r.launch_ns);
  }
  std::map<std::size_t, std::vector<std::vector<const SyncRecord*>>> by_count;  // syncs per step -> their syncs
  std::map<std::size_t, std::vector<std::size_t>> steps_by_count;  // the same steps' indices
  std::size_t regular = 0;
  for (std::size_t k = 0; k < its.size(); ++k) {
    if (!its[k].regular || first_launch[k] == std::numeric_limits<std::int64_t>::max()) continue;
    ++regular;
    const std::int64_t from = first_launch[k];
    const std::int64_t to = k + 1 < its.size() && first_launch[k + 1] != std::numeric_limits<std::int64_t>::max()
                                ? first_launch[k + 1]
                                : from + static_cast<std::int64_t>(t.period_ns);
    std::vector<const SyncRecord*> mine;
    for (const auto& y : trace.syncs)
      if (y.enter_ns >= from && y.enter_ns < to && (y.device < 0 || y.device == a.device)) mine.push_back(&y);
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

}  // namespace gearshift::trace
