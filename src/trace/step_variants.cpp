#include "trace/step_variants.hpp"

#include <algorithm>
#include <map>
#include <tuple>

#include "trace/sequence_align.hpp"

namespace gearshift::trace {

namespace {

// (after, skip, inserted ops as (name id, kind)): one block as the steps are counted by.
using Op = std::pair<std::uint32_t, OpKind>;
using Block = std::tuple<std::int64_t, std::size_t, std::vector<Op>>;

// The blocks of one step against the template, from their alignment (sequence_align.hpp). Each gap between two
// matched template positions is one block, anchored at the last matched position before it: template positions
// matched by nothing (left out), step ops matched to nothing (inserted), or both (the step ran other ops in
// their place: an alternative). Empty when more than `max_d` ops differ.
std::vector<Block> blocks_of(const std::vector<std::uint32_t>& tmpl, const std::vector<std::uint32_t>& names,
                             const std::vector<OpKind>& kinds, std::size_t max_d) {
  const std::vector<std::int64_t> map = align_lcs(tmpl, names.data(), names.size(), max_d);
  std::vector<Block> out;
  if (map.empty()) return out;
  std::int64_t next = 0;   // the step's first op not yet placed
  std::int64_t last = -1;  // the last matched template position
  auto gap = [&](std::int64_t p, std::int64_t upto) {  // template positions last+1 .. p-1, step ops next .. upto-1
    std::vector<Op> ops;
    for (std::int64_t i = next; i < upto; ++i)
      ops.emplace_back(names[static_cast<std::size_t>(i)], kinds[static_cast<std::size_t>(i)]);
    const auto skip = static_cast<std::size_t>(p - last - 1);
    if (skip > 0 || !ops.empty()) out.emplace_back(last, skip, std::move(ops));
  };
  const auto n = static_cast<std::int64_t>(tmpl.size());
  for (std::int64_t p = 0; p < n; ++p) {
    const std::int64_t at = map[static_cast<std::size_t>(p)];
    if (at < 0) continue;
    gap(p, at);
    last = p;
    next = at + 1;
  }
  gap(n, static_cast<std::int64_t>(names.size()));
  return out;
}

std::size_t length_of(const Block& b) { return std::get<1>(b) + std::get<2>(b).size(); }

}  // namespace

std::vector<StepVariant> step_variants(const Trace& t, const IterationAnalysis& a, const StepVariantOptions& o) {
  const auto& tops = a.tmpl.ops;
  if (tops.empty() || std::any_of(tops.begin(), tops.end(), [](const TemplateOp& op) { return op.graph_id != 0; }))
    return {};
  std::vector<std::uint32_t> tmpl;
  for (const auto& op : tops) tmpl.push_back(op.name_id);
  const auto max_d = static_cast<std::size_t>(o.max_edit_share * static_cast<double>(tmpl.size()));

  std::map<Block, std::size_t> seen;  // block -> steps that ran it
  std::vector<std::uint32_t> step;
  std::vector<OpKind> kinds;
  auto first = t.ops.begin();
  for (const Iteration& it : a.iterations) {
    first = std::lower_bound(first, t.ops.end(), it.start_ns, [](const OpRecord& r, std::int64_t s) { return r.start_ns < s; });
    step.clear();
    kinds.clear();
    bool graph = false;
    for (auto r = first; r != t.ops.end() && r->start_ns < it.end_ns; ++r) {
      if (r->device != a.device) continue;
      graph |= r->graph_id != 0;
      step.push_back(r->name_id);
      kinds.push_back(r->kind);
    }
    if (graph || step.empty() || step == tmpl) continue;
    std::vector<Block> bs = blocks_of(tmpl, step, kinds, max_d);
    std::sort(bs.begin(), bs.end());
    bs.erase(std::unique(bs.begin(), bs.end()), bs.end());
    for (auto& b : bs)
      if (length_of(b) >= (std::get<1>(b) > 0 && !std::get<2>(b).empty() ? o.min_alternative_ops : o.min_ops))
        ++seen[std::move(b)];
  }

  std::vector<std::pair<Block, std::size_t>> kept;
  for (const auto& [b, n] : seen)
    if (n >= o.min_steps) kept.emplace_back(b, n);
  std::stable_sort(kept.begin(), kept.end(), [](const auto& x, const auto& y) {
    if (x.second != y.second) return x.second > y.second;
    return length_of(x.first) > length_of(y.first);
  });
  const auto budget = static_cast<std::size_t>(o.max_inserted_share * static_cast<double>(tmpl.size()));
  std::size_t inserted = 0;
  std::vector<StepVariant> out;
  for (const auto& [b, n] : kept) {
    if (out.size() >= o.max_variants) break;
    const auto& [after, skip, keys] = b;
    if (inserted + keys.size() > budget) continue;
    inserted += keys.size();
    StepVariant v;
    v.after = after;
    v.skip = skip;
    v.steps = n;
    for (const auto& [name, kind] : keys) v.ops.emplace_back(t.names[name], kind);
    out.push_back(std::move(v));
  }
  std::sort(out.begin(), out.end(), [](const StepVariant& x, const StepVariant& y) {
    if (x.after != y.after) return x.after < y.after;
    return x.skip < y.skip;  // insertions (skip 0) first
  });
  return out;
}

}  // namespace gearshift::trace
