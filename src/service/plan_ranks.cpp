#include "service/plan_ranks.hpp"

#include <algorithm>
#include <ctime>
#include <filesystem>
#include <map>
#include <string>
#include <stdexcept>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "service/error.hpp"
#include "gearshift/version.hpp"
#include "gpu/spec.hpp"
#include "sim/evaluate.hpp"
#include "sim/measurement.hpp"
#include "sim/power_attribution.hpp"
#include "sim/simulator.hpp"
#include "trace/error.hpp"
#include "trace/gearshift_format.hpp"
#include "trace/iteration.hpp"
#include "trace/rank_files.hpp"

namespace gearshift::service {

using Kind = ServiceError::Kind;

namespace {

// service::load_rank on a trace already imported (its GPU was read first), its calibration judged as `gearshift
// plan` judges it (service/plan_job.cpp): a fit at its bound or with impossible figures gives no plan.
service::RankInput rank_input(trace::Trace t, const std::string& spec, const std::string& path, bool calibrate) {
  service::RankInput in = service::rank_from_trace(std::move(t), spec, path, calibrate);
  if (!in.calibrated_to) return in;
  auto bound = sim::calibration_bound_warnings(in.model);
  for (auto& why : sim::implausible_calibration(in.model)) bound.push_back("implausible: " + why);
  if (!bound.empty())
    throw ServiceError(Kind::kModelRefused,
                       fmt::format("{}: no plan: the model cannot reproduce the measured power ({:.0f} W from {}): {}. "
                                   "--no-calibrate plans every rank with the uncalibrated class priors",
                                   path, in.calibrated_to->average_power_w, in.calibrated_to->source,
                                   fmt::join(bound, "; ")));
  const double modelled_ns =
      sim::simulate(in.workload, in.model, sim::default_schedule(in.workload, in.model), 0).step_time_ns;
  if (const std::string why = sim::calibrated_step_refusal(modelled_ns, in.measured_step_time_ns,
                                                           in.calibrated_to->average_power_w);
      !why.empty())
    throw ServiceError(Kind::kModelRefused, fmt::format("{}: no plan: {}; --no-calibrate plans every rank with the "
                                                        "uncalibrated class priors",
                                                        path, why));
  // As `gearshift plan` holds it: a memory-clock change would count the power the model could not place as saved.
  if (std::optional<sim::MemoryClockHeld> held = sim::hold_memory_clock(in.model)) {
    in.model = std::move(held->model);
    model::refresh_reference_clocks(in.workload, in.model);
    in.warnings.push_back(std::move(held->warning));
  }
  return in;
}

// As `gearshift plan` checks its plan (service/plan_job.cpp, check_the_other_reading): where rank r's calibration
// puts more memory/uncore power than memory can draw, its plan is simulated with that surplus read as SM activity;
// a warning gives both readings' figures, and a plan that costs energy or misses the deadline there is refused.
void check_the_other_reading(std::vector<service::RankInput>& ranks, const service::SyncSlackResult& res,
                             std::size_t r) {
  service::RankInput& in = ranks[r];
  if (!in.calibrated_to) return;
  const double bound_w = sim::max_memory_power_w(in.model.spec());
  const double memory_w = in.model.params().memory_w_at_max;
  if (!(memory_w > bound_w)) return;
  model::Workload w = in.workload;
  model::DvfsModel m = in.model;
  const double measured_w = in.calibrated_to->average_power_w;
  const sim::SurplusAsActivity a = sim::place_surplus_as_activity(w, m, measured_w, bound_w);
  if (!a.reached) return;  // only the memory reading reproduces the measured power
  const service::RankPlanInReading p = service::rank_plan_in_reading(ranks, res, r, w, m);
  const service::RankPlan& plan = res.ranks[r];
  const std::string note =
      sim::other_reading_intro(memory_w, bound_w, a.sigmas, measured_w) +
      fmt::format(" this rank's plan a MODELLED saving of {:.2f} % with its step at {:.2f} ms against the {:.2f} ms "
                  "deadline (in the memory reading: {:.2f} %, {:.2f} ms)",
                  p.saving_pct, p.planned_step_time_ns * 1e-6, res.deadline_ns * 1e-6, plan.saving_pct,
                  plan.planned_step_time_ns * 1e-6);
  const bool costs = plan.saving_pct > 0 && p.saving_pct <= 0;
  const bool late = p.planned_step_time_ns > res.deadline_ns * (1 + sim::kReadingSlowdownTolerance);
  if (costs || late)
    throw ServiceError(Kind::kModelRefused,
                       fmt::format("{}: no plan: one measured power cannot tell which reading is the GPU's, and in "
                                   "one of them the rank's plan {}: {}",
                                   in.source, costs ? "costs energy" : "misses the deadline", note));
  in.warnings.push_back(note);
}

// Data-parallel ranks run one model: the same kernels a step (their collectives aside) and, synchronised by
// those collectives, the same step period. Traces that differ are not ranks of one job: planned together, two
// unrelated single-GPU jobs got a 31.76 % saving and a rank stretched 1.5x 40.70 %, each deadline set by the
// other trace (held-out inputs, session 28). Share: kernel names in common, collectives (the communication
// class, model/kernel_class.hpp) left out, as a multiset, over the larger step's.
constexpr double kMinSharedKernels = 0.8;
constexpr double kMaxPeriodRatio = 1.2;

void check_ranks_of_one_job(const std::vector<service::RankInput>& ranks) {
  auto names = [](const model::Workload& w) {
    std::map<std::string, std::size_t> m;
    for (const auto& op : w.ops)
      if (op.kind == trace::OpKind::kernel && op.cls != model::KernelClass::communication) ++m[op.name];
    return m;
  };
  const auto base = names(ranks[0].workload);
  std::size_t base_n = 0;
  for (const auto& [n, c] : base) base_n += c;
  for (std::size_t r = 1; r < ranks.size(); ++r) {
    const auto mine = names(ranks[r].workload);
    std::size_t n = 0, shared = 0;
    for (const auto& [name, c] : mine) {
      n += c;
      if (auto it = base.find(name); it != base.end()) shared += std::min(c, it->second);
    }
    const double share = static_cast<double>(shared) / static_cast<double>(std::max<std::size_t>(1, std::max(n, base_n)));
    if (share < kMinSharedKernels)
      throw ServiceError(Kind::kBadInput,
                         fmt::format("{} and {}: their steps share {:.0f} % of their kernels ({} and {} a step, NCCL's "
                                     "left out), below {:.0f} %: not ranks of one data-parallel job",
                                     ranks[0].source, ranks[r].source, 100 * share, base_n, n, 100 * kMinSharedKernels));
    const double p0 = ranks[0].workload.period_ns, p1 = ranks[r].workload.period_ns;
    if (std::max(p0, p1) > kMaxPeriodRatio * std::min(p0, p1))
      throw ServiceError(Kind::kBadInput,
                         fmt::format("{} and {}: step periods {:.2f} and {:.2f} ms, more than {:.1f}x apart: ranks of "
                                     "one data-parallel job wait for each other in every step (traces of other runs, "
                                     "or of other steps?)",
                                     ranks[0].source, ranks[r].source, p0 / 1e6, p1 / 1e6, kMaxPeriodRatio));
  }
}

// One trace per rank: a file holding several devices' kernels (two ranks merged) would be planned as its busiest
// device, and given twice, both ranks would get that device's plan.
void check_one_device(const trace::Trace& t, const std::string& path) {
  std::map<std::int32_t, std::size_t> per_device;
  for (const auto& op : t.ops)
    if (op.kind == trace::OpKind::kernel) ++per_device[op.device];
  if (per_device.size() > 1)
    throw ServiceError(Kind::kBadInput,
                       fmt::format("{}: holds the kernels of {} devices; plan-ranks takes one trace per rank (split "
                                   "it per device, or plan one device with `gearshift plan --device N`)",
                                   path, per_device.size()));
}

}  // namespace

service::SyncSlackResult run_plan_ranks(const std::vector<std::string>& traces, const std::optional<std::string>& gpu,
                                    const service::SyncSlackOptions& options, std::vector<service::RankInput>* inputs,
                                    std::vector<GpuChoice>* gpus) {
  if (gpu) {  // a bad --gpu is reported before a long import
    try {
      gpu::find_spec(*gpu);
    } catch (const std::invalid_argument& e) {
      throw ServiceError(Kind::kBadArgument, std::string(e.what()) + "; pass one of those with --gpu");
    }
  }
  std::map<std::string, std::size_t> first_rank;  // canonical path -> the first rank given it
  std::vector<std::string> duplicate_of(traces.size());
  for (std::size_t i = 0; i < traces.size(); ++i) {
    std::error_code ec;
    std::string key = std::filesystem::weakly_canonical(traces[i], ec).string();
    if (ec) key = traces[i];
    if (auto [it, fresh] = first_rank.try_emplace(key, i); !fresh)
      duplicate_of[i] = fmt::format("the same trace as rank {}: two identical ranks, a stand-in rather than a "
                                    "measured job", it->second);
  }
  std::vector<service::RankInput> ranks;
  std::vector<GpuChoice> choices;
  for (const auto& path : traces) {
    try {
      trace::Trace t = trace::import_trace(path);
      check_one_device(t, path);
      choices.push_back(choose_gpu(gpu, t, path));
      ranks.push_back(rank_input(std::move(t), choices.back().spec, path, options.calibrate));
      if (const std::string& d = duplicate_of[ranks.size() - 1]; !d.empty()) ranks.back().warnings.push_back(d);
    } catch (const trace::TraceError& e) {
      throw ServiceError(Kind::kBadInput, e.what());
    } catch (const trace::NoIterationError& e) {
      throw ServiceError(Kind::kNoIteration, fmt::format("{}: {}", path, e.what()));
    } catch (const std::invalid_argument& e) {
      throw ServiceError(Kind::kBadArgument, e.what());
    }
  }
  if (ranks.size() > 1) check_ranks_of_one_job(ranks);
  if (gpus) *gpus = std::move(choices);
  service::SyncSlackResult r;
  try {
    r = service::plan_sync_slack(ranks, options);
  } catch (const std::invalid_argument& e) {
    throw ServiceError(Kind::kBadInput, e.what());
  }
  for (std::size_t i = 0; i < ranks.size(); ++i) check_the_other_reading(ranks, r, i);
  if (inputs) *inputs = std::move(ranks);
  return r;
}

nlohmann::json plan_ranks_report_json(const std::vector<std::string>& traces, const service::SyncSlackResult& r,
                                      const std::vector<GpuChoice>& gpus,
                                      const std::vector<service::RankInput>& inputs) {
  using nlohmann::json;
  json ranks = json::array();
  json warnings = json::array();
  for (const std::string& w : rank_warnings(gpus, inputs)) warnings.push_back(w);
  for (const auto& p : r.ranks)
    ranks.push_back({{"rank", p.rank},
                     {"gpu_selection",
                      p.rank >= 0 && p.rank < static_cast<int>(gpus.size()) ? gpus[p.rank].to_json() : json(nullptr)},
                     {"trace", p.rank < static_cast<int>(traces.size()) ? traces[p.rank] : ""},
                     {"traced_step_time_s", p.traced_step_time_ns * 1e-9},
                     {"traced_energy_j", p.traced_energy_j},
                     {"comm_time_s", p.comm_time_ns * 1e-9},
                     {"intrinsic_comm_time_s", p.intrinsic_comm_time_ns * 1e-9},
                     {"intrinsic_step_time_s", p.intrinsic_step_time_ns * 1e-9},
                     {"straggler_factor", p.straggler_factor},
                     {"planned_step_time_s", p.planned_step_time_ns * 1e-9},
                     {"baseline_energy_j", p.baseline_energy_j},
                     {"planned_energy_j", p.planned_energy_j},
                     {"saving_pct", p.saving_pct},
                     {"clock_changes_per_step", p.schedule.change_positions().size()}});
  return {{"modelled", true},
          {"deadline_s", r.deadline_ns * 1e-9},
          {"straggler", r.straggler},
          {"switch_latency_us", r.switch_latency_ns / 1e3},
          {"job_step_time_before_s", r.job_step_time_before_ns * 1e-9},
          {"job_step_time_after_s", r.job_step_time_after_ns * 1e-9},
          {"collectives_replayed", r.collectives_replayed},
          {"job_energy_before_j", r.job_energy_before_j},
          {"job_energy_after_j", r.job_energy_after_j},
          {"warnings", warnings},
          {"ranks", ranks}};
}

std::vector<std::string> rank_warnings(const std::vector<GpuChoice>& gpus,
                                       const std::vector<service::RankInput>& inputs) {
  std::vector<std::string> out;
  for (std::size_t i = 0; i < std::max(gpus.size(), inputs.size()); ++i) {
    if (i < gpus.size() && !gpus[i].warning.empty()) out.push_back(fmt::format("rank {}: {}", i, gpus[i].warning));
    if (i < inputs.size())
      for (const auto& w : inputs[i].warnings) out.push_back(fmt::format("rank {}: {}", i, w));
  }
  return out;
}

plan::PlanFile rank_plan_file(const service::RankInput& in, const service::SyncSlackResult& r, std::size_t rank,
                              const GpuChoice* gpu) {
  const auto& p = r.ranks.at(rank);
  const auto& w = in.workload;
  plan::PlanFile f;
  f.gpu = in.model.spec().name;
  if (gpu) f.gpu_selection = plan::PlanFileGpuSelection{gpu->spec, gpu->source, gpu->trace_gpu, gpu->trace_spec};
  f.strategy = std::string("sync-slack ") + plan::to_string(p.schedule.strategy);
  f.switch_latency_us = r.switch_latency_ns / 1e3;
  f.period_us = w.period_ns / 1e3;
  f.rank = p.rank;
  f.deadline_s = r.deadline_ns * 1e-9;
  f.straggler_factor = p.straggler_factor;
  plan::PlanFilePredicted pr;
  pr.time_s = p.planned_step_time_ns * 1e-9;
  pr.energy_j = p.planned_energy_j;
  pr.baseline_energy_j = p.baseline_energy_j;
  pr.saving_pct = p.saving_pct;
  pr.clock_changes_per_step = p.schedule.change_positions().size();
  f.predicted = pr;
  for (std::size_t i = 0; i < w.ops.size(); ++i) {
    const auto& op = w.ops[i];
    f.positions.push_back({op.name, op.kind, op.stream, model::to_string(op.cls), model::to_string(op.pass),
                           op.ref_time_ns / 1e3, op.start_offset_ns / 1e3, p.schedule.clocks[i]});
  }
  for (const auto& ph : plan::phases_of(p.schedule))
    f.phases.push_back({ph.first, ph.last, w.ops[ph.first].name, ph.clocks});
  f.model = plan::model_section(in.model.params(), std::nullopt);
  plan::PlanFileProvenance v;
  v.input = in.source;
  if (gpu && !gpu->warning.empty()) v.warnings.push_back(gpu->warning);
  for (const auto& warning : in.warnings) v.warnings.push_back(warning);
  std::time_t now = std::time(nullptr);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", std::gmtime(&now));
  v.created = buf;
  v.gearshift_version = kVersion;
  f.provenance = std::move(v);
  return f;
}

nlohmann::json rank_plan_file_json(const service::RankInput& in, const service::SyncSlackResult& r, std::size_t rank,
                                   const GpuChoice* gpu) {
  return plan::to_json(rank_plan_file(in, r, rank, gpu));
}

std::vector<std::string> rank_traces(const std::vector<std::string>& args, std::vector<std::string>* skipped) {
  std::error_code ec;
  if (args.size() != 1 || !std::filesystem::is_directory(args[0], ec)) {
    for (const auto& t : args)
      if (std::filesystem::is_directory(t, ec))
        throw ServiceError(Kind::kBadArgument,
                           fmt::format("{}: a directory is planned alone (plan-ranks DIR), not beside other traces", t));
    return args;
  }
  try {
    trace::RankFiles f = trace::rank_trace_files(args[0]);
    if (f.ranks.size() < 2)
      throw ServiceError(Kind::kBadInput,
                         fmt::format("{}: one rank's trace ({}): plan it with `gearshift plan`", args[0], f.ranks[0]));
    if (skipped != nullptr) *skipped = std::move(f.skipped);
    return std::move(f.ranks);
  } catch (const std::invalid_argument& e) {
    throw ServiceError(Kind::kBadInput, e.what());
  }
}

}  // namespace gearshift::service
