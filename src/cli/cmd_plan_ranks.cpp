// `gearshift plan-ranks TRACE0 TRACE1 ...`: one trace per data-parallel rank, in rank order; or one directory of a
// `gearshift trace -o FILE` run under a launcher (FILE, FILE.rank1, ...: trace/rank_files.hpp).
#include <algorithm>
#include <cmath>
#include <memory>
#include <optional>

#include <fmt/core.h>

#include "cli/commands.hpp"
#include "service/plan_job.hpp"
#include "service/plan_ranks.hpp"
#include "plan/plan_file.hpp"

namespace gearshift::cli {

using namespace gearshift::service;  // the jobs this face calls

namespace {

struct Args {
  std::vector<std::string> traces;
  std::string gpu, strategy = "phase", out_prefix;  // gpu empty: each trace's GPU
  std::optional<double> switch_latency_ms;  // absent: the GPU spec's estimate
  bool json = false;
  bool no_calibrate = false;
};

void execute(Args a) {
  std::vector<std::string> skipped;
  a.traces = rank_traces(a.traces, &skipped);  // a directory: its ranks' files
  for (const auto& f : skipped)
    fmt::print(stderr, "gearshift plan-ranks: {}: not a rank's training process (a .pid file), not planned\n", f);
  service::SyncSlackOptions o;
  const std::optional<plan::Strategy> strategy = plan::parse_strategy(a.strategy);
  if (strategy != plan::Strategy::phase && strategy != plan::Strategy::kernel_global)
    throw Exit(kUsage, fmt::format("--strategy '{}': phase or kernel-global", a.strategy));
  o.strategy = *strategy;
  o.calibrate = !a.no_calibrate;
  if (a.switch_latency_ms) {
    if (!(*a.switch_latency_ms >= 0) || !std::isfinite(*a.switch_latency_ms))
      throw Exit(kUsage, fmt::format("--switch-latency-ms {}: the switch latency must be a number of ms >= 0",
                                     *a.switch_latency_ms));
    o.switch_latency_ns = *a.switch_latency_ms * 1e6;
  }
  std::vector<service::RankInput> inputs;
  std::vector<GpuChoice> gpus;
  auto r = run_plan_ranks(a.traces, a.gpu.empty() ? std::nullopt : std::optional<std::string>(a.gpu), o, &inputs,
                          &gpus);
  if (!a.out_prefix.empty()) {
    for (std::size_t i = 0; i < inputs.size(); ++i) {
      const std::string path = fmt::format("{}{}.json", a.out_prefix, i);
      try {
        plan::write_plan_file(rank_plan_file(inputs[i], r, i, &gpus.at(i)), path);
      } catch (const plan::PlanFileError& e) {
        throw Exit(kBadInput, e.what());
      }
    }
  }
  if (a.json) {
    fmt::print("{}\n", plan_ranks_report_json(a.traces, r, gpus, inputs).dump(2));
    return;
  }
  fmt::print("gearshift plan-ranks: {} data-parallel ranks; all figures MODELLED (DVFS model + simulator)\n",
             r.ranks.size());
  // One GPU line when every rank has the same, else one per rank; then each rank's warnings.
  bool same = std::all_of(gpus.begin(), gpus.end(), [&](const GpuChoice& g) { return g.line() == gpus[0].line(); });
  for (std::size_t i = 0; i < gpus.size() && !(same && i > 0); ++i)
    fmt::print("GPU           {}{}\n", same ? "" : fmt::format("rank {}: ", i), gpus[i].line());
  for (const std::string& w : rank_warnings(gpus, inputs)) fmt::print("Warning       {}\n", w);
  fmt::print("Deadline      {:.4f} s per step, set by rank {} (the straggler); job step {:.4f} s -> {:.4f} s{}\n",
             r.deadline_ns * 1e-9, r.straggler, r.job_step_time_before_ns * 1e-9, r.job_step_time_after_ns * 1e-9,
             r.collectives_replayed ? " (ranks replayed together: each collective ends with the slowest rank's)" : "");
  fmt::print("{:<5} {:>10} {:>10} {:>10} {:>9} {:>11} {:>11} {:>8}\n", "rank", "NCCL (s)", "wait-free", "own step",
             "factor", "before (J)", "after (J)", "saving");
  for (const auto& p : r.ranks)
    fmt::print("{:<5} {:>10.4f} {:>10.4f} {:>10.4f} {:>9.3f} {:>11.2f} {:>11.2f} {:>7.2f}%\n", p.rank,
               p.comm_time_ns * 1e-9, p.intrinsic_comm_time_ns * 1e-9, p.intrinsic_step_time_ns * 1e-9,
               p.straggler_factor, p.baseline_energy_j, p.planned_energy_j, p.saving_pct);
  fmt::print("Job           {:.2f} J -> {:.2f} J per step ({:.2f} %)\n", r.job_energy_before_j, r.job_energy_after_j,
             100 * (r.job_energy_before_j - r.job_energy_after_j) / r.job_energy_before_j);
}

}  // namespace

void add_plan_ranks_command(CLI::App& app) {
  auto a = std::make_shared<Args>();
  auto* cmd = app.add_subcommand(
      "plan-ranks", "Sync-aware slack: deadline every data-parallel rank at the straggler and plan the others (modelled)");
  cmd->add_option("traces", a->traces,
                  "one trace per rank, in rank order (torch.profiler Chrome or gearshift), or the directory of one "
                  "`gearshift trace -o FILE` run (FILE, FILE.rank1, ...)")
      ->required()
      ->check(CLI::ExistingPath);
  cmd->add_option("--gpu", a->gpu,
                  "GPU spec name (gearshift gpus --spec all); default: the GPU each trace names, else h200");
  cmd->add_option("--strategy", a->strategy, "phase (at the switch latency) or kernel-global (ideal switching)");
  cmd->add_option("--switch-latency-ms", a->switch_latency_ms, "phase strategy's L, ms (default: the GPU spec's)");
  cmd->add_option("-o,--output-prefix", a->out_prefix, "write each rank's plan.json to PREFIX<rank>.json");
  cmd->add_flag("--json", a->json, "print one JSON object");
  cmd->add_flag("--no-calibrate", a->no_calibrate, "Do not scale each rank's model to its trace's measured power");
  cmd->callback([a] { execute(*a); });
}

}  // namespace gearshift::cli
