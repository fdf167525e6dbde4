// `gearshift run --plan plan.json [--apply] -- CMD ARGS`: runs the job and applies the plan online.
// `gearshift run --auto --max-slowdown PCT [--apply] -- CMD ARGS`: plans from the job's first steps, then applies.
//
// The job gets the CUPTI injection library (as `gearshift run` gives it) and every CUDA process of it connects
// to our socket (GEARSHIFT_RUNTIME_SOCKET, runtime/feed_server.hpp; protocol: feed/protocol.hpp) and streams launches and
// completed-kernel activity; this process follows one of them (with --plan the first on --gpu that launches a
// kernel; with --auto the busiest on --gpu whose kernels give steps), predicts positions, schedules the changes
// and actuates them from its runtime thread. With --auto the feed is first only collected (service/auto_plan.hpp) until
// the plan exists (service/live_run.hpp runs the job). Default is dry-run: every intended change goes to a log. With --apply the session
// (runtime/session.hpp) refuses when this process may not lock clocks, else takes the GPU's lock, starts the
// watchdog and locks clocks through NVML; if NVML still refuses a change it warns once and continues as dry-run.
// Clocks are restored when the job ends (normally, by a
// signal that reached us and was forwarded, or killed), by the watchdog when this process is killed.
#include <filesystem>
#include <utility>
#include <vector>

#include <fmt/core.h>
#include <fmt/format.h>

#include "cli/commands.hpp"
#include "cli/switching_args.hpp"
#include "gpu/open_gpus.hpp"
#include "gpu/spec.hpp"
#include "launch/inject_library.hpp"
#include "monitor/prometheus_server.hpp"
#include "plan/plan_file.hpp"
#include "runtime/safety.hpp"
#include "runtime/session.hpp"
#include "service/live_run.hpp"
#include "service/plan_job.hpp"

namespace gearshift::cli {

using namespace gearshift::service;  // the jobs this face calls

namespace {

// The options the job takes as they are (lr), and those checked and turned into it (check_run_options).
struct Opts {
  LiveRunOptions lr;
  std::string plan, max_slowdown, plan_output, gpu_spec, model, prometheus, untraced_dump;
  bool no_verify = false;
  bool apply = false, auto_plan = false, lock_memory = false;
  std::size_t warmup_steps = 20;
  double warmup_timeout_s = 600;
  double warmup_no_step_s = 30;
  std::string progress_name = "markers";
  double one_pair_follow_s = static_cast<double>(runtime::kOnePairFollowNs) * 1e-9;
};

void check_directory(const std::string& option, const std::string& file) {
  const auto dir = std::filesystem::absolute(file).parent_path();
  std::error_code ec;
  if (!std::filesystem::is_directory(dir, ec))
    throw Exit(kUsage, fmt::format("{} {}: directory {} does not exist", option, file, dir.string()));
}

// Every usage error of `run` (exit 2) and the plan file's (exit 3), before anything starts.
LiveRunOptions check_run_options(const Opts& o, const CLI::App& cmd) {
  LiveRunOptions lr = o.lr;
  // A trace file records every kernel's activity anyway: the runtime may as well anchor on it.
  lr.progress = !lr.trace_output.empty() ? runtime::GpuProgress::activity : runtime::parse_gpu_progress(o.progress_name);
  if (o.auto_plan) {
    if (!o.plan.empty()) throw Exit(kUsage, "--plan and --auto exclude each other: --auto makes its own plan");
    if (o.max_slowdown.empty()) throw Exit(kUsage, "--auto needs --max-slowdown, e.g. --max-slowdown 0.5%");
    lr.ao.max_slowdown = parse_slowdown(o.max_slowdown);
    if (const std::string echo = slowdown_echo(o.max_slowdown); !echo.empty())
      fmt::print(stderr, "gearshift run: note: {}\n", echo);
    lr.ao.warmup_steps = o.warmup_steps;
    lr.ao.timeout_ns = seconds_to_ns(o.warmup_timeout_s);
    lr.ao.no_step_timeout_ns = seconds_to_ns(o.warmup_no_step_s);
    if (lr.switching.latency_ns) lr.ao.switch_latency_ns = *lr.switching.latency_ns;  // none: the spec's
    if (!o.plan_output.empty()) check_directory("--plan-output", o.plan_output);
    lr.ao.plan_output = o.plan_output;
    lr.ao.untraced_dump = o.untraced_dump;
    lr.ao.job_name = "launch feed of `" + lr.cmd[0] + "` (gearshift run --auto)";
    if (!o.model.empty()) {
      lr.ao.model = load_model_checked(o.model);
      lr.ao.model_path = o.model;
      if (!o.gpu_spec.empty() && gpu::find_spec(o.gpu_spec).name != lr.ao.model->gpu)
        throw Exit(kUsage, fmt::format("--model {} was calibrated on a {} GPU, --gpu-spec is {}", o.model,
                                       lr.ao.model->gpu, o.gpu_spec));
    }
  } else {
    const std::pair<bool, const char*> auto_only[] = {
        {!o.plan_output.empty(), "--plan-output"},
        {!o.gpu_spec.empty(), "--gpu-spec"},         {cmd.count("--warmup-steps") > 0, "--warmup-steps"},
        {!o.model.empty(), "--model"},              {cmd.count("--warmup-timeout") > 0, "--warmup-timeout"},
        {cmd.count("--warmup-no-step-s") > 0, "--warmup-no-step-s"}};
    for (const auto& [given, name] : auto_only)
      if (given) throw Exit(kUsage, fmt::format("{} is for --auto (a --plan was made with its own)", name));
    if (o.plan.empty()) throw Exit(kUsage, "run needs --plan plan.json or --auto --max-slowdown PCT");
    lr.plan = load_live_plan(o.plan);
    // The verification's budget: --max-slowdown, else the one the plan was made for, else 0.5 %.
    if (!o.max_slowdown.empty()) {
      lr.verify.budget = parse_slowdown(o.max_slowdown);
      if (const std::string echo = slowdown_echo(o.max_slowdown); !echo.empty())
        fmt::print(stderr, "gearshift run: note: {}\n", echo);
    }
    else if (auto b = plan::read_plan_file(o.plan).max_slowdown) lr.verify.budget = *b;
  }
  if (o.auto_plan) lr.verify.budget = lr.ao.max_slowdown;
  lr.verify.enabled = !o.no_verify;
  if (!lr.verify.log_path.empty()) {
    if (o.no_verify) throw Exit(kUsage, "--verify-log needs the verification on (drop --no-verify)");
    check_directory("--verify-log", lr.verify.log_path);
  }
  if (!lr.timeline.empty()) check_directory("--timeline", lr.timeline);
  lr.one_pair_follow_ns = seconds_to_ns(o.one_pair_follow_s);
  return lr;
}

runtime::SessionOptions session_options(const Opts& o) {
  runtime::SessionOptions so;
  so.apply = o.apply;
  so.gpu = o.lr.gpu;
  so.lock_memory = o.lock_memory;
  so.dry_run_log = o.lr.dry_run_log;
  if (o.apply) so.watchdog_exe = launch::self_exe();
  so.record_changes = !o.lr.timeline.empty();  // --timeline: every intended change, dry-run or applied
  return so;
}

// The watchdog process (started by `run --apply`; not for people).
void add_watchdog_command(CLI::App& app) {
  struct WOpts {
    std::string uuid;
    int fd = -1;
    bool memory = false;
  };
  auto w = std::make_shared<WOpts>();
  auto* wd = app.add_subcommand("_watchdog", "");
  wd->group("");  // hidden
  wd->add_option("--uuid", w->uuid)->required();
  wd->add_option("--fd", w->fd)->required();
  wd->add_flag("--memory", w->memory);
  wd->callback([w] {
    int rc = runtime::watchdog_main(w->uuid, w->fd, w->memory);
    if (rc != 0) throw Exit(kFailure, "watchdog could not reset the clocks");
  });
}

}  // namespace

void add_run_command(CLI::App& app) {
  auto o = std::make_shared<Opts>();
  o->lr.dry_run_log = "gearshift-dry-run.jsonl";
  auto* cmd = app.add_subcommand("run", "Run a training job and apply a clock plan online (dry-run unless --apply)");
  cmd->add_option("--plan", o->plan, "plan.json from `gearshift plan -o`");
  cmd->add_flag("--auto", o->auto_plan, "Plan from the job's first steps (clocks untouched meanwhile), then apply");
  cmd->add_option("--max-slowdown", o->max_slowdown,
                  "Step-time budget, e.g. 0.5% or 0.005: --auto plans for it; with --plan the measured verification "
                  "keeps it (default: the plan's own, else 0.5%)");
  cmd->add_option("--warmup-steps", o->warmup_steps, "With --auto: steps to detect before planning (default 20)")
      ->check(CLI::Range(2, 100000));
  cmd->add_option("--warmup-timeout", o->warmup_timeout_s,
                  "With --auto: give up planning after this many seconds, s (default 600)")
      ->check(CLI::PositiveNumber);
  cmd->add_option("--gpu-spec", o->gpu_spec,
                  fmt::format("With --auto: GPU spec to plan for ({}; default: from NVML's name)",
                              fmt::join(gpu::spec_names(), ", ")));
  cmd->add_option("--warmup-no-step-s", o->warmup_no_step_s,
                  "With --auto: give up (the job's feed off) once this long passed, since the first 20,000 kernels and "
                  "copies were recorded, with no training step found in any process (default 30)")
      ->check(CLI::NonNegativeNumber);
  cmd->add_option("--plan-output", o->plan_output, "With --auto: also write the plan made (plan.json)");
  // A bench aid (bench/device/auto_real_jobs.sh), hidden from --help: the untraced window's launch times.
  cmd->add_option("--untraced-dump", o->untraced_dump)->group("");
  cmd->add_option("--model", o->model,
                  "With --auto: plan with this `gearshift calibrate` model file instead of the class priors");
  cmd->add_flag("--apply", o->apply, "Lock clocks through NVML (needs root or CAP_SYS_ADMIN); default: dry-run");
  cmd->add_flag("--lock-memory", o->lock_memory, "Also lock memory clocks where the GPU supports it");
  add_switching_options(cmd, o->lr.switching);
  cmd->add_option("--gpu", o->lr.gpu, "NVML index of the GPU the job uses (default 0)");
  cmd->add_option("--dry-run-log", o->lr.dry_run_log, "Intended changes, one JSON line each (dry-run and fallback)");
  cmd->add_option("--trace-output", o->lr.trace_output,
                  "Also keep the job's trace (gearshift trace file, as `gearshift trace -o`); default: none");
  cmd->add_option("--timeline", o->lr.timeline,
                  "Write the intended clock changes (and the traced kernels with --trace-output) as a Perfetto / "
                  "chrome://tracing timeline (Trace Event JSON, .gz: compressed)");
  cmd->add_option("--gpu-progress", o->progress_name,
                  "How the runtime follows the GPU: markers (a GPU write to host memory after one kernel every "
                  "5 ms, and the job's synchronizes; default), sync (the job's synchronizes only) or activity "
                  "(every kernel's activity record: costs the job 1-2 % on small kernels; implied by "
                  "--trace-output)")
      ->check(CLI::IsMember({"markers", "sync", "activity"}))
      ->type_name("markers|sync|activity");
  cmd->add_option("--one-pair-follow-s", o->one_pair_follow_s,
                  fmt::format("A plan of one clock pair for the whole step: follow the job this long once the pair is "
                              "set (J per step measured meanwhile), then turn its launch feed off so that gearshift "
                              "costs it nothing; the pair stays locked to its end, s (default {:g})",
                              static_cast<double>(runtime::kOnePairFollowNs) * 1e-9))
      ->check(CLI::NonNegativeNumber);
  cmd->add_flag("--no-verify", o->no_verify,
                "Do not measure the plan against the baseline on the job (default: blocks of whole steps alternate "
                "plan and baseline clocks in ABBA order with --apply, and are only measured in a dry run)");
  cmd->add_option("--verify-log", o->lr.verify.log_path, "One JSON line per verification block and decision");
  cmd->add_option("--verify-block-steps", o->lr.verify.block_steps,
                  "Measured steps per verification block, at least (blocks also last >= 20 energy-counter periods; "
                  "default 5)")
      ->check(CLI::PositiveNumber);
  cmd->add_option("--verify-block-s", o->lr.verify.block_seconds,
                  "Seconds per verification block, at least (default: 20 periods of the GPU's energy counter, 2 s on "
                  "an H100/H200; at least 0.3 s: shorter blocks hold too few counter ticks)")
      ->check(CLI::Range(0.3, 3600.0));
  cmd->add_option("--prometheus", o->prometheus,
                  "Serve the measured verification's figures as Prometheus gauges on :PORT or HOST:PORT (GET /metrics)");
  cmd->add_option("cmd", o->lr.cmd, "-- CMD ARGS")->required();
  cmd->callback([o, cmd] {
    LiveRunOptions lr = check_run_options(*o, *cmd);  // every usage error before the job starts
    runtime::Session session(session_options(*o));    // refusals: SessionError, exit codes in main.cpp
    // NVML's devices map each job process's CUDA ordinals to GPUs; a dry run without NVML maps plain indices.
    std::vector<gpu::DeviceInfo> infos;
    try {
      infos = gpu::open_gpus(false).infos;
    } catch (const gpu::OpenError&) {
    }
    lr.progress_sink = [](std::string_view line) { fmt::print(stderr, "{}\n", line); };  // the run's lines
    if (o->auto_plan) lr.ao.gpu_spec = auto_gpu_spec(o->gpu_spec, infos, o->lr.gpu, o->apply, lr.progress_sink);
    LiveRun run(std::move(lr), session, std::move(infos));
    std::unique_ptr<monitor::PrometheusServer> server;  // before `run` goes: it reads the run's verifier
    if (!o->prometheus.empty()) {
      try {
        server = std::make_unique<monitor::PrometheusServer>(o->prometheus, [&run] { return run.prometheus_text(); });
        fmt::print(stderr, "gearshift run: Prometheus metrics on http://{}:{}/metrics\n", server->host(), server->port());
      } catch (const std::exception& e) {
        throw Exit(kUsage, std::string("run: --prometheus: ") + e.what());
      }
    }
    const launch::ChildExit ce = run.run_job();
    server.reset();
    const runtime::SessionStats ss = session.stop();  // restores the default clocks, releases the GPU
    fmt::print(stderr, "{}", run.summary(ss));
    if (!ce.started) throw Exit(ce.code, o->lr.cmd[0] + ": " + ce.error);
    if (ce.code != 0) throw Exit(ce.code, fmt::format("{} exited with status {}", o->lr.cmd[0], ce.code));
  });

  add_watchdog_command(app);
}

}  // namespace gearshift::cli
