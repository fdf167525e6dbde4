// What a plan's saving rests on (issue 46): the modelled saving per step split into parts that sum to it exactly.
//
// - busy kernels' clocks: the dynamic energy (above idle) the plan's clocks save on its kernels, copies and
//   memsets, where the op ran no longer or its extra time lengthens the step (paid from the step-time budget).
//   It rests on the model's time and power of each kernel at its clocks.
// - waits, by kind (graph/waits.hpp): the same for the part of an op's extra time that its free float on the
//   baseline step absorbs: op i slowed by Δ with float F gives min(Δ, F)/Δ of its dynamic saving to the kind of
//   wait that float lies in. It rests on that wait being real: a launch-bound wait read from a profiled run may
//   not exist without the profiler (service/cpu_side.hpp decides which CPU side the replay takes).
// - board idle power: the rest, i.e. the idle power at the clocks in effect over the step (a lower SM clock in
//   the gaps, a longer step) and the falls to idle in the gaps (sim/simulator.hpp's energy terms).
// A first-order attribution: each op's float is its own on the baseline (free_float_ns: all of them can be used
// at once), the kind its tightest successor's. Without the dependency replay (no launch events) the fallback rule
// keeps every traced gap, so no slowing lands in a wait and the waits part is 0. Energies in J per step, MODELLED.
#pragma once

#include <array>
#include <string>

#include <nlohmann/json.hpp>

#include "graph/waits.hpp"
#include "model/dvfs_model.hpp"
#include "model/workload.hpp"
#include "plan/schedule.hpp"

namespace gearshift::sim {

struct SavingParts {
  double baseline_energy_j = 0;  // the baseline step's energy, J
  double saving_j = 0;           // baseline − plan, J per step: busy_kernels_j + Σ waits_j + idle_j
  double busy_kernels_j = 0;     // J per step
  std::array<double, graph::kWaitKinds> waits_j{};  // J per step, indexed by graph::WaitKind (none stays 0)
  double idle_j = 0;             // J per step
  bool dependency_replay = false;

  double waits_total_j() const;
  double pct(double j) const { return baseline_energy_j > 0 ? j / baseline_energy_j * 100 : 0; }
  // "busy kernels' clocks 1.10 %, waits 0.45 % (launch-bound 0.40 %, synchronize 0.05 %), board idle power 0.25 %"
  // (% of the baseline energy; a wait kind is named when it holds at least 0.005 %).
  std::string line() const;
  // {"saving_j", "baseline_energy_j", "busy_kernels_pct", "waits_pct", "waits_by_kind_pct": {kind: %},
  //  "idle_power_pct", "dependency_replay"} (% of the baseline energy; the JSON report, docs/report.md).
  nlohmann::json to_json() const;
};

// Simulates the baseline (default clocks) and `plan` at `switch_latency_ns` with their timelines and splits the
// saving. Throws std::invalid_argument for a schedule of another number of positions (simulate's error).
SavingParts saving_parts(const model::Workload& w, const model::DvfsModel& m, const plan::Schedule& plan,
                         double switch_latency_ns);

}  // namespace gearshift::sim
