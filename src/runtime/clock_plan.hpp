// The clock plan as the runtime holds it, built from plan.json (plan/plan_file.hpp owns the format, its reading
// and its validation): the template's op names in order with their mean duration and start offset, and the clocks
// wanted at each.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "model/dvfs_model.hpp"
#include "plan/plan_file.hpp"

namespace gearshift::runtime {

// plan.json is missing, unreadable or invalid; the message names the file and the field.
using PlanError = plan::PlanFileError;

struct PlanPosition {
  std::string name;
  double duration_ns = 0;      // mean GPU duration at the traced clocks, ns
  double start_offset_ns = 0;  // mean GPU start relative to the step's start, ns
  model::ClockPair clocks;     // wanted (SM, memory) clocks, MHz
  bool kernel = true;          // plan.json "kind" == "kernel"; false for memcpy/memset ops
  // A CUDA graph launch is one position (one launch on the CPU): named trace::graph_launch_name(graph id), its
  // duration the launch's span (first op start to last op end), its clocks the launch's. Ops of the plan in it.
  std::size_t ops = 1;
  // CPU time of its launch call in one traced step relative to that step's start, ns (plan.json
  // "launch_offset_us"): the order the CPU launches the positions in. None when the trace did not record it.
  std::optional<double> launch_offset_ns = std::nullopt;
};

// A step variant (plan::PlanFileVariant) over the runtime's positions: in some steps `ops` launched after
// position `after` (-1: before the first) in place of positions after+1 .. after+skip (an insertion: skip 0; a
// skip: no ops; an alternative: both). The predictor follows them (runtime/predictor.hpp); inserted launches
// run at the clocks of the position they follow.
struct PlanVariant {
  std::int64_t after = -1;
  std::vector<std::pair<std::string, bool>> ops;  // (name, is a kernel) in launch order; empty for a skip
  std::size_t skip = 0;
};

struct ClockPlan {
  std::string gpu;                     // GPU spec name, e.g. "NVIDIA H200"
  std::vector<PlanPosition> positions; // template order
  double period_ns = 0;                // step time (start to next start), ns
  double switch_latency_ns = 0;        // L the plan was made for, ns
  model::ClockPair default_clocks;     // what the GPU runs when unlocked (spec boost SM clock, max memory), MHz
  // One clock pair for the whole step, run instead of the positions' clocks once the plan's changes are seen
  // not to land in time (runtime_core.hpp, "in-time guard"); none: no guard, the plan runs to the end. Set by
  // `run --auto` from the same evaluation's one-pair ("iteration") plan; plan.json does not carry it.
  std::optional<model::ClockPair> in_time_fallback;
  std::vector<PlanVariant> variants;   // by `after`, over `positions`

  std::size_t size() const { return positions.size(); }
  // Template positions p where clocks[p] differs from clocks[p-1] (cyclic).
  std::vector<std::size_t> change_positions() const;
  // The clock pair (MHz) of every position when they are all the same (no change inside the step: `plan`'s
  // iteration strategy, or any plan that happens to hold one pair); none for a plan with a change or no position.
  // Such a plan needs no sign of GPU progress once its pair is set (runtime/gpu_progress.hpp).
  std::optional<model::ClockPair> one_pair() const;
  // The plan's kernel time per step: its positions' mean durations summed, ns (the in-time guard's unit).
  double kernel_ns_per_step() const;
  // The plan over kernel positions only, what a live launch stream of kernel launches (the CUPTI feed) can
  // be matched against: memcpy/memset ops are not kernel launches and would read as missing on every step.
  // Offsets, durations and clocks of the kept positions are unchanged; variants are renumbered and keep their
  // kernels (one left with neither is dropped). A plan without kernels is returned whole.
  ClockPlan kernels_only() const;
};

// The runtime's plan from a plan file (validated: plan::read_plan_file / plan_file_from_json / validate). The
// positions of one graph launch become one position, at the launch's first (docs/plan-format.md).
ClockPlan clock_plan_from(const plan::PlanFile& f);
// plan::plan_file_from_json, then clock_plan_from. Throws PlanError.
ClockPlan plan_from_json(const nlohmann::json& j, const std::string& source);
// plan::read_plan_file, then clock_plan_from. Throws PlanError.
ClockPlan load_plan(const std::string& path);

}  // namespace gearshift::runtime
