// `gearshift pipeline`: the iteration time–energy frontier of a pipeline-parallel job and its clock plans
// (Perseus, Chung et al., SOSP'24). Reads a stage profile, writes OUTDIR/frontier.csv, OUTDIR/pareto.csv,
// OUTDIR/schedules.json and prints the (modelled) summary. With --evaluate PLAN: the modelled time, energy and
// per-rank busy/idle of that one plan instead (service/evaluate_pipeline.hpp); --overhead-from MEASURED adds the time
// the graph leaves out (pipeline/left_out_time.hpp).
#include <filesystem>
#include <fstream>
#include <memory>
#include <optional>

#include <fmt/core.h>

#include "cli/commands.hpp"
#include "pipeline/report.hpp"
#include "service/evaluate_pipeline.hpp"
#include "service/plan_pipeline.hpp"

namespace gearshift::cli {

namespace {

struct PipelineOptions {
  service::PipelineJobOptions job;
  std::string outdir;
  bool json = false;
  std::string evaluate;  // --evaluate PLAN
  std::string overhead_from;  // --overhead-from MEASURED (with --evaluate)
  double lag_ms = 0;          // --lag-ms (with --overhead-from)
  // Options whose presence matters: --evaluate takes the plan file's values for those not given.
  CLI::Option *schedule = nullptr, *stages = nullptr, *microbatches = nullptr, *virtual_stages = nullptr,
              *unit = nullptr, *power = nullptr, *cost = nullptr, *output = nullptr, *overhead = nullptr,
              *lag = nullptr;
};

void write_file(const std::filesystem::path& path, const std::string& text) {
  std::ofstream f(path, std::ios::binary);
  f << text;
  if (!f) throw Exit(kBadInput, "-o: cannot write " + path.string());
}

template <typename T>
std::optional<T> given(const CLI::Option* opt, const T& value) {
  return opt->count() ? std::optional<T>(value) : std::nullopt;
}

void evaluate(const PipelineOptions& o) {
  service::PipelineEvaluateOptions e;
  e.profile_path = o.job.profile_path;
  e.plan_path = o.evaluate;
  e.schedule = given(o.schedule, o.job.schedule);
  e.stages = given(o.stages, o.job.stages);
  e.microbatches = given(o.microbatches, o.job.microbatches);
  e.virtual_stages = given(o.virtual_stages, o.job.virtual_stages);
  e.time_unit_ms = given(o.unit, o.job.time_unit_ms);
  e.blocking_power_w = given(o.power, o.job.blocking_power_w);
  e.cost_model = given(o.cost, o.job.cost_model);
  e.overhead_from = given(o.overhead, o.overhead_from);
  e.lag_ms = given(o.lag, o.lag_ms);
  const auto r = service::evaluate_pipeline_plan(e);  // ServiceError: exit codes in main.cpp
  const auto j = service::evaluation_json(r);
  if (!o.outdir.empty()) {
    std::error_code ec;
    std::filesystem::create_directories(o.outdir, ec);
    if (ec || !std::filesystem::is_directory(o.outdir))
      throw Exit(kBadInput, fmt::format("-o {}: cannot create the output directory: {}", o.outdir,
                                        ec ? ec.message() : std::string("a file of that name exists")));
    write_file(std::filesystem::path(o.outdir) / "evaluation.json", j.dump(1) + "\n");
  }
  if (o.json) fmt::print("{}\n", j.dump(2));
  else fmt::print("{}", service::evaluation_text(r));
}

void run(const PipelineOptions& o) {
  using namespace pipeline;
  if (!o.evaluate.empty()) return evaluate(o);
  for (const CLI::Option* only : {o.overhead, o.lag})
    if (only->count()) throw Exit(kUsage, only->get_name() + " needs --evaluate");
  for (const CLI::Option* req : {o.stages, o.microbatches, o.output})
    if (!req->count()) throw Exit(kUsage, req->get_name() + " is required (without --evaluate)");
  const service::PipelineJobResult r = service::run_pipeline_job(o.job);  // ServiceError: exit codes in main.cpp
  const PipelinePlan& plan = r.plan;
  const Summary& sum = r.summary;
  std::error_code ec;
  std::filesystem::create_directories(o.outdir, ec);
  if (ec || !std::filesystem::is_directory(o.outdir))
    throw Exit(kBadInput, fmt::format("-o {}: cannot create the output directory: {}", o.outdir,
                                      ec ? ec.message() : std::string("a file of that name exists")));
  const std::filesystem::path dir(o.outdir);
  write_file(dir / "frontier.csv", frontier_csv(plan.frontier, false));
  write_file(dir / "pareto.csv", frontier_csv(plan.frontier, true));
  write_file(dir / "schedules.json", schedules_json(plan, sum).dump(1) + "\n");
  if (o.json) {
    auto j = summary_json(plan, sum);
    j["outputs"] = {(dir / "frontier.csv").string(), (dir / "pareto.csv").string(), (dir / "schedules.json").string()};
    fmt::print("{}\n", j.dump(2));
  } else {
    fmt::print("{}", summary_text(plan, sum));
    fmt::print("wrote {}/frontier.csv (every solver step), pareto.csv (Pareto-optimal rows), schedules.json\n",
               o.outdir);
  }
}

}  // namespace

void add_pipeline_command(CLI::App& app) {
  auto o = std::make_shared<PipelineOptions>();
  auto* cmd = app.add_subcommand(
      "pipeline", "Pipeline-parallel energy planner: iteration time–energy frontier and per-rank clock plans (modelled)");
  cmd->add_option("profile", o->job.profile_path,
                  "Stage profile CSV: Perseus 'stage,instruction,frequency,time,energy' or gearshift "
                  "'stage,instruction,sm_clock_mhz,time_s,energy_j'")
      ->required();
  o->schedule = cmd->add_option("--schedule", o->job.schedule, "Pipeline schedule")
      ->check(CLI::IsMember({"gpipe", "1f1b", "interleaved"}))
      ->capture_default_str();
  o->stages = cmd->add_option("--stages", o->job.stages, "Pipeline stages (ranks) S (required without --evaluate)")
                  ->check(CLI::Range(1, 4096));
  o->microbatches = cmd->add_option("--microbatches", o->job.microbatches,
                                    "Microbatches per iteration M (required without --evaluate)")
                        ->check(CLI::Range(1, 1 << 20));
  o->virtual_stages = cmd->add_option("--virtual-stages", o->job.virtual_stages, "Model chunks per rank v (interleaved 1F1B)")
      ->check(CLI::Range(1, 1024))
      ->capture_default_str();
  o->unit = cmd->add_option("--time-unit-ms", o->job.time_unit_ms, "Time grid unit U [ms]")->capture_default_str();
  o->power = cmd->add_option("--blocking-power-w", o->job.blocking_power_w, "Per-GPU power while waiting [W]")
                 ->capture_default_str();
  o->cost = cmd->add_option("--cost-model", o->job.cost_model,
                  "hull: lower convex hull of measured options; exp-fit: a·exp(b·t)+c as in Perseus")
      ->check(CLI::IsMember({"hull", "exp-fit"}))
      ->capture_default_str();
  cmd->add_option("--straggler", o->job.straggler, "Straggler factor F: another pipeline takes F·T_min")
      ->capture_default_str();
  cmd->add_option("--deadline-ms", o->job.deadline_ms, "Also plan for this iteration deadline [ms]");
  cmd->add_option("--max-solve-s", o->job.max_solve_seconds,
                  "Refuse a frontier estimated to take longer than this on a 2-core machine [s]")
      ->capture_default_str();
  o->output = cmd->add_option("-o,--output", o->outdir,
                              "Output directory (required without --evaluate; with it: OUTDIR/evaluation.json)");
  cmd->add_flag("--json", o->json, "Print the summary (or the evaluation) as JSON");
  cmd->add_option("--evaluate", o->evaluate,
                  "Evaluate this clock plan instead of planning: gearshift schedules.json, a lowtime "
                  "freqs_pipeline_*.py or a Perseus sched.json (gzip too); modelled time, energy, per-rank busy/idle. "
                  "Shape, unit, power and cost model default to the plan file's where it records them");
  o->overhead = cmd->add_option(
      "--overhead-from", o->overhead_from,
      "With --evaluate: a Perseus prof.json(.gz) of a MEASURED all-max-clock run of this pipeline; the time the "
      "compute-only graph leaves out (optimizer step, syncs) is fitted from it as a per-iteration overhead and added "
      "at the blocking power");
  o->lag = cmd->add_option("--lag-ms", o->lag_ms,
                           "With --overhead-from: send/receive lag added on each cross-stage edge [ms] (given, not "
                           "fitted: one iteration cannot tell it from the overhead; default 0)");
  cmd->callback([o] { run(*o); });
}

}  // namespace gearshift::cli
