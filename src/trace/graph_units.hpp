// CUDA graph launches as units. One cuGraphLaunch runs many GPU ops that all carry the launch call's correlation
// id; the CPU sees one launch, so the runtime (predictor, scheduler, plan positions) counts it as one unit and
// no clock change can fall inside it (docs/trace-format.md, docs/runtime.md).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_set>
#include <vector>

#include "trace/iteration.hpp"
#include "trace/record.hpp"

namespace gearshift::trace {

// The launch unit's name, as the launch feed's L line and the runtime's plan position give it:
// "cudaGraphLaunch graph=<graph_id>".
std::string graph_launch_name(std::uint32_t graph_id);
// The graph id of such a name; nullopt for any other name.
std::optional<std::uint32_t> graph_id_of_launch_name(std::string_view name);

// Ops that share a correlation id (>= 0) with another op of their device ran from one graph launch (a
// non-graph launch runs exactly one op). Those still without a graph id (traces written before the tracer
// recorded it) get one: graphs are told apart by their op-name sequence, numbered 1, 2, ... in order of first
// launch. Returns the number of graph launches found. `t.ops` sorted by start.
// `graph_correlations`, where given, are the only correlation ids that are graph launches (a Chrome trace's
// cudaGraphLaunch runtime events: its exporters repeat ids where no graph ran); without it, any shared id (the
// gearshift format, whose ids are CUPTI's, one per launch call).
std::size_t infer_graph_launches(Trace& t, const std::unordered_set<std::int64_t>* graph_correlations = nullptr);

// Positions that start a launch unit, given each position's graph launch (TemplateOp::graph_launch, -1: none):
// a position outside graphs, or the first position of a graph launch; every position after a launch's first
// up to its last (other streams' ops too) runs while the graph does. A clock change may only land at a unit
// start.
std::vector<bool> unit_starts(const std::vector<std::int64_t>& graph_launch);

// Numbers the template's graph launches. On entry TemplateOp::graph_launch holds the correlation id of the
// position's representative op (graph ops only, else -1); on return the launch's ordinal in the step (0, 1,
// ... in position order), -1 outside graphs.
void number_graph_launches(IterationTemplate& tmpl);

}  // namespace gearshift::trace
