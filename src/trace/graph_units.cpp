#include "trace/graph_units.hpp"

#include <algorithm>
#include <charconv>
#include <map>
#include <unordered_map>

namespace gearshift::trace {
namespace {
constexpr std::string_view kPrefix = "cudaGraphLaunch graph=";
}

std::string graph_launch_name(std::uint32_t graph_id) { return std::string(kPrefix) + std::to_string(graph_id); }

std::optional<std::uint32_t> graph_id_of_launch_name(std::string_view name) {
  if (!name.starts_with(kPrefix)) return std::nullopt;
  std::string_view digits = name.substr(kPrefix.size());
  std::uint32_t id = 0;
  auto [end, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), id);
  if (ec != std::errc() || end != digits.data() + digits.size() || digits.empty()) return std::nullopt;
  return id;
}

std::size_t infer_graph_launches(Trace& t, const std::unordered_set<std::int64_t>* graph_correlations) {
  // (device, correlation) -> op indices, in start order.
  std::map<std::pair<std::int32_t, std::int64_t>, std::vector<std::size_t>> by_launch;
  for (std::size_t i = 0; i < t.ops.size(); ++i) {
    const std::int64_t c = t.ops[i].correlation;
    if (graph_correlations ? graph_correlations->contains(c) : c >= 0) by_launch[{t.ops[i].device, c}].push_back(i);
  }
  // Launches in order of their first op; a graph without an id is named by its op-name sequence.
  std::vector<const std::vector<std::size_t>*> launches;
  for (const auto& [key, v] : by_launch)
    if (v.size() >= 2) launches.push_back(&v);
  std::sort(launches.begin(), launches.end(), [&](auto* a, auto* b) { return a->front() < b->front(); });
  std::uint32_t next_id = 1;
  for (const auto& op : t.ops) next_id = std::max(next_id, op.graph_id + 1);
  std::map<std::vector<std::uint32_t>, std::uint32_t> by_sequence;
  for (const auto* v : launches) {
    std::uint32_t known = 0;
    for (std::size_t i : *v) known = std::max(known, t.ops[i].graph_id);
    if (known == 0) {
      std::vector<std::uint32_t> seq;
      for (std::size_t i : *v) seq.push_back(t.ops[i].name_id);
      auto [it, fresh] = by_sequence.try_emplace(std::move(seq), next_id);
      if (fresh) ++next_id;
      known = it->second;
    }
    for (std::size_t i : *v) t.ops[i].graph_id = known;
  }
  return launches.size();
}

void number_graph_launches(IterationTemplate& tmpl) {
  std::unordered_map<std::int64_t, std::int64_t> ordinal;  // correlation -> ordinal
  for (auto& op : tmpl.ops) {
    if (op.graph_launch < 0 || op.graph_id == 0) {
      op.graph_launch = -1;
      continue;
    }
    auto [it, fresh] = ordinal.try_emplace(op.graph_launch, static_cast<std::int64_t>(ordinal.size()));
    op.graph_launch = it->second;
  }
}

std::vector<bool> unit_starts(const std::vector<std::int64_t>& graph_launch) {
  const std::size_t n = graph_launch.size();
  std::vector<bool> start(n, true);
  std::map<std::int64_t, std::pair<std::size_t, std::size_t>> span;  // launch -> first, last position
  for (std::size_t i = 0; i < n; ++i) {
    const std::int64_t g = graph_launch[i];
    if (g < 0) continue;
    auto [it, fresh] = span.try_emplace(g, i, i);
    it->second.second = i;
  }
  // Everything after a launch's first position up to its last runs while the graph does (other streams too).
  for (const auto& [g, fl] : span)
    for (std::size_t i = fl.first + 1; i <= fl.second; ++i) start[i] = false;
  return start;
}

}  // namespace gearshift::trace
