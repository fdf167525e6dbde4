// Synchronization-aware slack across data-parallel ranks (docs/design.md "Synchronization-aware slack").
//
// Every rank of a data-parallel job runs the same step template and meets the others in the gradient
// all-reduce. A rank with less work arrives early and spins inside the NCCL kernels until the slowest rank
// (the straggler) arrives: its traced NCCL kernel time holds that wait. gearshift removes the
// wait from each rank's template, deadlines every rank at the straggler, and plans the faster ranks' clocks
// so that they arrive just in time instead of waiting at full clocks.
//
// Model (all figures modelled, simulator.hpp):
// - Wait of rank r: W_r = C_r − min_q C_q, with C_r the traced time of its communication (NCCL) ops per step.
//   Every rank moves the same gradients, so the least NCCL time is the transfer itself and the excess is time
//   spent waiting. (Positions are not matched between ranks: different batch shapes make cuBLAS pick other
//   kernels, so the templates of data-parallel ranks differ op by op.)
// - Wait-free template of rank r: its communication ops scaled by min_q C_q / C_r.
// - I_r = simulated step time of the wait-free template at default clocks; deadline D = max_r I_r (the
//   straggler; straggler factor s_r = D / I_r ≥ 1).
// - Rank r's plan: minimum energy with simulated step time ≤ D (the strategy's serial budget
//   Σ op times + (D − I_r), tightened until the simulator agrees).
// - Energy per step of rank r under a schedule = simulated energy of its wait-free template + the wait left
//   until D at the power of a spinning NCCL kernel at the clocks in effect. Baseline and plan are accounted the
//   same way, so the saving is their difference. Job step time = max over ranks of simulated step times.
// - The simulator's rules (graph/step_graph.hpp) apply to each rank: with launch events its template is replayed as
//   a dependency graph and its plan spends the free float of work followed by a wait first (plan/clock_table.hpp);
//   a wait until D at least the switch latency long runs at the lowest SM clock where that saves energy (the
//   rank's last position is lowered when its step still meets D). sim/collectives.hpp replays the ranks together
//   (a collective ends with the slowest rank) where every rank's trace has launch events.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "model/dvfs_model.hpp"
#include "model/workload.hpp"
#include "sim/measurement.hpp"
#include "trace/record.hpp"
#include "plan/schedule.hpp"

namespace gearshift::service {

// One rank's input: its traced template and the model (calibrated to the rank's measured power if known).
struct RankInput {
  model::Workload workload;
  model::DvfsModel model;
  std::string source;                  // trace path, for messages
  double measured_step_time_ns = 0;    // from the trace's meta (s/step there), 0 if absent
  double measured_energy_j = 0;        // J/step from the trace's meta, 0 if absent
  std::optional<sim::MeasuredPower> calibrated_to;  // the measured power the model was calibrated to; none: not calibrated
  std::vector<std::string> warnings;   // what the rank's figures rest on (plain words): the trace's import and
                                       // step-detection warnings (a stalled step), its memory clock held
};

// Imports a trace (Chrome/Kineto or gearshift format), detects its steps, builds the workload and calibrates
// the model to the trace's measured average power when it has one. Throws trace::TraceError (bad file),
// trace::NoIterationError (no repeating step), std::invalid_argument (unknown GPU spec).
RankInput load_rank(const std::string& trace_path, const std::string& gpu = "h200");
// The same on a trace already imported (`label` names it in results): steps by the step contract, calibration
// to its measured power (sim/measurement.hpp) unless `calibrate` is false. Throws trace::NoIterationError as
// detection does. The caller judges the calibration (sim::implausible_calibration), as `gearshift plan` does.
RankInput rank_from_trace(trace::Trace t, const std::string& gpu, const std::string& label, bool calibrate = true);

struct SyncSlackOptions {
  plan::Strategy strategy = plan::Strategy::phase;  // phase (switch latency below) or kernel_global (ideal)
  std::optional<double> switch_latency_ns = std::nullopt;  // ns, >= 0; none: the GPU spec's estimate
  bool calibrate = true;  // calibrate each rank's model to its trace's measured power (false: the class priors)
};

struct RankPlan {
  int rank = 0;
  double traced_step_time_ns = 0;     // simulated step of the traced template at default clocks, ns
  double traced_energy_j = 0;         // its energy, J (compare with measured_energy_j)
  double comm_time_ns = 0;            // Σ communication op times in the traced template, ns
  double intrinsic_comm_time_ns = 0;  // the same after removing the wait, ns
  double intrinsic_step_time_ns = 0;  // I_r, ns
  double straggler_factor = 1;        // D / I_r
  double planned_step_time_ns = 0;    // simulated step of the intrinsic template under the plan, ns (≤ D)
  double baseline_energy_j = 0;     // default clocks, wait accounted, J/step
  double planned_energy_j = 0;      // the plan, wait accounted, J/step
  double saving_pct = 0;            // (baseline − planned) / baseline · 100
  plan::Schedule schedule;          // per template position
};

struct SyncSlackResult {
  double deadline_ns = 0;               // D, ns
  int straggler = 0;                    // rank whose I_r is D
  double job_step_time_before_ns = 0;   // max_r I_r (= D), ns
  double job_step_time_after_ns = 0;    // max_r planned step time, ns
  double job_energy_before_j = 0, job_energy_after_j = 0;  // Σ over ranks, J/step
  double switch_latency_ns = 0;
  std::vector<RankPlan> ranks;
  // Every rank's trace has launch events: the job's step before and after is the ranks replayed together
  // (sim/collectives.hpp: each collective ends with the slowest rank's), not the max of the ranks' own.
  bool collectives_replayed = false;
};

// Throws std::invalid_argument for no rank, ranks of which only some communicate (not one data-parallel job),
// or an unknown strategy.
SyncSlackResult plan_sync_slack(const std::vector<RankInput>& ranks, const SyncSlackOptions& options = {});

// Rank `rank`'s plan in `res` (planned from `ranks`) simulated on another reading of that rank's power: `w` and
// `m` are its traced workload and model in that reading (sim/power_attribution.hpp). Accounted as
// plan_sync_slack accounts it: the wait-free template, the wait until the deadline at the clocks the step ends on.
struct RankPlanInReading {
  double saving_pct = 0;            // against the default clocks in the same reading, %
  double planned_step_time_ns = 0;  // ns; over res.deadline_ns: the plan misses the deadline in this reading
};
RankPlanInReading rank_plan_in_reading(const std::vector<RankInput>& ranks, const SyncSlackResult& res,
                                       std::size_t rank, const model::Workload& w, const model::DvfsModel& m);

}  // namespace gearshift::service
