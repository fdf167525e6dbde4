// The clock plan as the runtime reads it from plan.json (written by `gearshift plan -o plan.json`): the
// template's op names in order with their mean duration and start offset, and the clocks wanted at each.
#pragma once

#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "model/dvfs_model.hpp"

namespace gearshift::runtime {

// plan.json is missing, unreadable or lacks a field; the message names the file and the field.
class PlanError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

struct PlanPosition {
  std::string name;
  double duration_ns = 0;      // mean GPU duration at the traced clocks, ns
  double start_offset_ns = 0;  // mean GPU start relative to the step's start, ns
  model::ClockPair clocks;     // wanted (SM, memory) clocks, MHz
  bool kernel = true;          // plan.json "kind" == "kernel"; false for memcpy/memset ops
};

struct ClockPlan {
  std::string gpu;                     // GPU spec name, e.g. "NVIDIA H200"
  std::vector<PlanPosition> positions; // template order
  double period_ns = 0;                // step time (start to next start), ns
  double switch_latency_ns = 0;        // L the plan was made for, ns
  model::ClockPair default_clocks;     // what the GPU runs when unlocked (spec boost SM clock, max memory), MHz

  std::size_t size() const { return positions.size(); }
  // Template positions p where clocks[p] differs from clocks[p-1] (cyclic).
  std::vector<std::size_t> change_positions() const;
  // The plan over kernel positions only, what a live launch stream of kernel launches (the CUPTI feed) can
  // be matched against: memcpy/memset ops are not kernel launches and would read as missing on every step.
  // Offsets, durations and clocks of the kept positions are unchanged. A plan without kernels is returned whole.
  ClockPlan kernels_only() const;
};

// Throws PlanError.
ClockPlan plan_from_json(const nlohmann::json& j, const std::string& source);
ClockPlan load_plan(const std::string& path);

}  // namespace gearshift::runtime
