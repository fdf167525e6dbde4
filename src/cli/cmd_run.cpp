// `gearshift run --plan plan.json [--apply] -- CMD ARGS`: runs the job and applies the plan online.
// `gearshift run --auto --max-slowdown PCT [--apply] -- CMD ARGS`: plans from the job's first steps, then applies.
//
// The job gets the CUPTI injection library (as `gearshift run` gives it) and every CUDA process of it connects
// to our socket (GEARSHIFT_RUNTIME_SOCKET, feed_server.hpp; protocol: feed/protocol.hpp) and streams launches and
// completed-kernel activity; this process follows one of them (with --plan the first on --gpu that launches a
// kernel; with --auto the busiest on --gpu whose kernels give steps), predicts positions, schedules the changes
// and actuates them from its runtime thread. With --auto the feed is first only collected (auto_plan.hpp) until
// the plan exists. Default is dry-run: every intended change goes to a log. With --apply the session
// (runtime/session.hpp) refuses when this process may not lock clocks, else takes the GPU's lock, starts the
// watchdog and locks clocks through NVML; if NVML still refuses a change it warns once and continues as dry-run.
// Clocks are restored when the job ends (normally, by a
// signal that reached us and was forwarded, or killed), by the watchdog when this process is killed.
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <functional>
#include <optional>
#include <thread>
#include <utility>
#include <vector>

#include <fmt/core.h>
#include <fmt/format.h>

#include "service/auto_plan.hpp"
#include "cli/child_process.hpp"
#include "cli/commands.hpp"
#include "cli/feed_server.hpp"
#include "cli/run_energy.hpp"
#include "cli/gpu_progress.hpp"
#include "cli/inject_library.hpp"
#include "cli/open_gpus.hpp"
#include "service/plan_job.hpp"
#include "cli/run_timeline.hpp"
#include "cli/switching_args.hpp"
#include "cupti/config.hpp"
#include "feed/socket.hpp"
#include "gpu/cuda_visible.hpp"
#include "gpu/spec.hpp"
#include "runtime/feed.hpp"
#include "runtime/live.hpp"
#include "runtime/safety.hpp"
#include "runtime/session.hpp"
#include "trace/error.hpp"

namespace gearshift::cli {

using namespace gearshift::service;  // the jobs this face calls

// NVML index of a job process's CUDA ordinal: through its CUDA_VISIBLE_DEVICES and NVML's devices (`infos`,
// empty when NVML is not at hand: then only plain indices map, PCI bus order assumed as gpu/cuda_visible.hpp
// says).
GpuResolver gpu_resolver(std::vector<gpu::DeviceInfo> infos) {
  return [infos = std::move(infos)](const feed::Hello& h, int ordinal) -> std::optional<unsigned> {
    if (ordinal < 0) return std::nullopt;
    const auto at = static_cast<std::size_t>(ordinal);
    if (!infos.empty()) {
      try {
        const std::vector<unsigned> idx =
            gpu::cuda_visible_nvml_indices(infos, h.cuda_visible_devices
                                                      ? std::optional<std::string_view>(*h.cuda_visible_devices)
                                                      : std::nullopt);
        if (at < idx.size()) return idx[at];
      } catch (const std::invalid_argument&) {  // a MIG instance: not a whole GPU we control
      }
      return std::nullopt;
    }
    if (!h.cuda_visible_devices) return static_cast<unsigned>(ordinal);
    std::size_t start = 0;
    for (std::size_t i = 0;; ++i) {
      const std::size_t comma = h.cuda_visible_devices->find(',', start);
      const std::string entry = h.cuda_visible_devices->substr(start, comma == std::string::npos ? comma : comma - start);
      if (i == at) {
        if (entry.empty() || entry.find_first_not_of("0123456789") != std::string::npos) return std::nullopt;
        return static_cast<unsigned>(std::stoul(entry));
      }
      if (comma == std::string::npos) return std::nullopt;
      start = comma + 1;
    }
  };
}

namespace {

// The GPU spec --auto plans for: --gpu-spec, else the one named like NVML's device, else h200 (dry-run only: with
// --apply the clocks must come from the GPU's own table).
std::string auto_gpu_spec(const std::string& given, const std::vector<gpu::DeviceInfo>& infos, unsigned index,
                          bool apply) {
  if (!given.empty()) {
    try {
      return gpu::find_spec(given).name;
    } catch (const std::invalid_argument& e) {
      throw Exit(kUsage, std::string("--gpu-spec: ") + e.what());
    }
  }
  if (infos.empty()) {
    fmt::print(stderr, "gearshift run --auto: NVML is not at hand; planning for h200 (pass --gpu-spec to choose)\n");
    return "h200";
  }
  const std::string device = index < infos.size() ? infos[index].name : "";  // empty: no GPU of that index
  if (device.empty()) {
    fmt::print(stderr, "gearshift run --auto: NVML has no GPU {}; planning for h200 (pass --gpu-spec to choose)\n", index);
    return "h200";
  }
  std::string name = gpu::spec_name_for_device(device);
  if (!name.empty()) return name;
  if (apply)
    throw Exit(kUsage, fmt::format("GPU {} ('{}') has no spec to plan with; pass --gpu-spec (known: {}) if it is "
                                   "one of those",
                                   index, device, fmt::join(gpu::spec_names(), ", ")));
  fmt::print(stderr, "gearshift run --auto: no spec for GPU {} ('{}'); planning for h200 (pass --gpu-spec to choose)\n",
             index, device);
  return "h200";
}

// The job's environment for the tracer: the injection library (so that an unmodified CUDA job feeds us) and,
// with --trace-output, the trace file it also writes. Before any thread starts (setenv is not thread-safe).
void set_tracer_env(const std::string& trace_output) {
  try {
    set_injection_env(find_inject_library());
  } catch (const Exit& e) {
    // Not fatal: the job may carry its own hook (the Python package) that writes the feed.
    fmt::print(stderr, "gearshift run: warning: {}; the job is not traced unless it has its own gearshift hook\n",
               e.what());
  }
  if (trace_output.empty()) {
    unsetenv(cupti::kEnvOutput);  // feed only: no trace file unless asked for
    return;
  }
  set_trace_output_env(trace_output);
}

}  // namespace

std::string self_exe() {
  char path[4096];
  ssize_t n = readlink("/proc/self/exe", path, sizeof path - 1);
  if (n <= 0) throw Exit(kFailure, "cannot find the gearshift executable (/proc/self/exe)");
  return std::string(path, static_cast<std::size_t>(n));
}

namespace {

struct Opts {
  std::string plan, dry_run_log = "gearshift-dry-run.jsonl", max_slowdown, trace_output, plan_output, gpu_spec,
      timeline, model;
  bool apply = false, auto_plan = false, lock_memory = false;
  SwitchingArgs switching;
  unsigned gpu = 0;
  std::size_t warmup_steps = 20;
  double warmup_timeout_s = 600;
  std::string progress_name = "markers";
  GpuProgress progress = GpuProgress::markers;
  std::vector<std::string> cmd;
};

// The plan to run and its switching: --plan's at once, --auto's once made (the options for it in `ao`).
struct RunPlan {
  AutoOptions ao;
  std::optional<runtime::ClockPlan> plan;
  runtime::SchedulerOptions so;
};

// Every usage error of `run` (exit 2) and the plan file's (exit 3), before anything starts.
RunPlan check_run_options(Opts& o, const CLI::App& cmd) {
  // A trace file records every kernel's activity anyway: the runtime may as well anchor on it.
  o.progress = !o.trace_output.empty() ? GpuProgress::activity : parse_gpu_progress(o.progress_name);
  RunPlan rp;
  if (o.auto_plan) {
    if (!o.plan.empty()) throw Exit(kUsage, "--plan and --auto exclude each other: --auto makes its own plan");
    if (o.max_slowdown.empty()) throw Exit(kUsage, "--auto needs --max-slowdown, e.g. --max-slowdown 0.5%");
    rp.ao.max_slowdown = parse_slowdown(o.max_slowdown);
    rp.ao.warmup_steps = o.warmup_steps;
    rp.ao.timeout_s = o.warmup_timeout_s;
    rp.ao.switch_latency_ms = o.switching.latency_ms;  // none: the spec's estimate
    if (!o.plan_output.empty()) {
      const auto dir = std::filesystem::absolute(o.plan_output).parent_path();
      std::error_code ec;
      if (!std::filesystem::is_directory(dir, ec))
        throw Exit(kUsage, fmt::format("--plan-output {}: directory {} does not exist", o.plan_output, dir.string()));
      rp.ao.plan_output = o.plan_output;
    }
    rp.ao.job_name = "launch feed of `" + o.cmd[0] + "` (gearshift run --auto)";
    if (!o.model.empty()) {
      rp.ao.model = load_model_checked(o.model);
      rp.ao.model_path = o.model;
      if (!o.gpu_spec.empty() && gpu::find_spec(o.gpu_spec).name != rp.ao.model->gpu)
        throw Exit(kUsage, fmt::format("--model {} was calibrated on a {} GPU, --gpu-spec is {}", o.model,
                                       rp.ao.model->gpu, o.gpu_spec));
    }
  } else {
    const std::pair<bool, const char*> auto_only[] = {
        {!o.max_slowdown.empty(), "--max-slowdown"}, {!o.plan_output.empty(), "--plan-output"},
        {!o.gpu_spec.empty(), "--gpu-spec"},         {cmd.count("--warmup-steps") > 0, "--warmup-steps"},
        {!o.model.empty(), "--model"},              {cmd.count("--warmup-timeout") > 0, "--warmup-timeout"}};
    for (const auto& [given, name] : auto_only)
      if (given) throw Exit(kUsage, fmt::format("{} is for --auto (a --plan was made with its own)", name));
    if (o.plan.empty()) throw Exit(kUsage, "run needs --plan plan.json or --auto --max-slowdown PCT");
    rp.plan = load_plan_or_exit(o.plan);
    rp.so = o.switching.resolve(*rp.plan);
    rp.so.anchor_on_completions = o.progress == GpuProgress::activity;
  }
  if (!o.timeline.empty()) {
    const auto dir = std::filesystem::absolute(o.timeline).parent_path();
    std::error_code ec;
    if (!std::filesystem::is_directory(dir, ec))
      throw Exit(kUsage, fmt::format("--timeline {}: directory {} does not exist", o.timeline, dir.string()));
  }
  return rp;
}

runtime::SessionOptions session_options(const Opts& o) {
  runtime::SessionOptions so;
  so.apply = o.apply;
  so.gpu = o.gpu;
  so.lock_memory = o.lock_memory;
  so.dry_run_log = o.dry_run_log;
  if (o.apply) so.watchdog_exe = self_exe();
  so.record_changes = !o.timeline.empty();  // --timeline: every intended change, dry-run or applied
  return so;
}

// The job and its launch feed around a session: every CUDA process of the job connects to the feed server; one
// is followed (--plan: the first on --gpu to launch a kernel; --auto: the one the planner picks) and its events
// reach the session's runtime once it runs, the planner before.
class LiveRun {
 public:
  LiveRun(Opts& o, RunPlan rp, runtime::Session& session, std::vector<gpu::DeviceInfo> infos)
      : o_(o),
        rp_(std::move(rp)),
        session_(session),
        server_(gpu_resolver(std::move(infos)), [this](const FeedProcess& p, const feed::FeedEvent& e) { on_event(p, e); }),
        progress_(o.progress,
                  [this](const std::string& line) {
                    const std::int64_t f = server_.followed();
                    return f >= 0 && server_.send(static_cast<std::uint32_t>(f), line);
                  }),
        energy_(o.gpu),
        follow_first_(static_cast<bool>(rp_.plan)) {}

  // Runs the job to its end; the feed is read to its end too.
  ChildExit run_job() {
    // Set before any thread starts (setenv is not thread-safe).
    setenv(feed::kEnvSocket, server_.socket_path().c_str(), 1);
    progress_.set_job_env(/*collect_first=*/o_.auto_plan);
    rp_.ao.measure_untraced = progress_.may_stop_recording();
    rp_.ao.energy_j = [this] { return energy_.counter_j(); };  // --auto calibrates to the untraced run's power
    set_tracer_env(o_.trace_output);
    // The threads below inherit the blocked signals, so that run_child's wait takes every forwarded signal.
    std::optional<ForwardedSignalsBlocked> blocked;
    blocked.emplace();
    if (rp_.plan) {
      progress_.set_template_kernels(rp_.plan->kernels_only().size());
      session_.start(*rp_.plan, rp_.so);
    } else {
      planner_ = std::make_unique<AutoPlanner>(
          rp_.ao, [this](const runtime::ClockPlan& made, std::uint32_t source) { on_plan(made, source); },
          [this](std::uint32_t source) { return on_run_gpu(server_.process(source)); },
          [this](std::uint32_t source) {
            if (!server_.send(source, progress_.stop_recording_command()))
              fmt::print(stderr, "gearshift run: note: could not tell the job to stop recording every kernel\n");
          });
    }
    server_.start();
    ChildExit ce = run_child(o_.cmd);
    blocked.reset();
    server_.stop();  // reads what the job's processes still sent, then removes the socket's directory
    no_plan_ = planner_ ? planner_->finish() : std::string();
    return ce;
  }

  // After session.stop(): who fed, what the runtime did, the timeline.
  void print_summary(const runtime::SessionStats& ss) const {
    print_feed_summary();
    if (ss.started) print_stats(ss);
    else fmt::print(stderr, "gearshift run --auto: {}\n", no_plan_);
    if (!o_.timeline.empty()) write_timeline();
  }

 private:
  bool on_run_gpu(const FeedProcess& p) const { return p.gpu && *p.gpu == o_.gpu; }

  // --auto's plan is made: on the planner's thread; the main thread reads rp_ only after joining it (finish()).
  void on_plan(const runtime::ClockPlan& made, std::uint32_t source) {
    server_.follow(source, progress_.others_commands());
    rp_.plan = made;
    rp_.so = o_.switching.resolve(*rp_.plan);
    rp_.so.anchor_on_completions = progress_.anchor_on_completions();
    progress_.set_template_kernels(rp_.plan->kernels_only().size());
    session_.start(*rp_.plan, rp_.so);
    progress_.plan_ready(*session_.live(), server_.process(source).syncs);
  }

  // The feed reader's thread: events of the processes not followed are counted (by the server), not applied.
  void on_event(const FeedProcess& p, const feed::FeedEvent& e) {
    std::int64_t f = server_.followed();
    if (f < 0 && follow_first_ && e.kind == feed::FeedEvent::Kind::launch && on_run_gpu(p)) {
      server_.follow(p.index, progress_.others_commands());
      f = server_.followed();
    }
    // Not followed (another process followed, or --plan's process not found yet): counted, not applied.
    if ((f >= 0 && f != p.index) || (f < 0 && follow_first_)) return;
    if (!o_.timeline.empty() && !anchor_ && f >= 0 && e.kind == feed::FeedEvent::Kind::complete)
      anchor_ = ClockAnchor{p.hello.pid, e.correlation & 0xffff'ffff, e.gpu_start_ns, e.gpu_end_ns - e.gpu_start_ns};
    if (f >= 0) progress_.on_event(e, session_.live());
    if (session_.feed(e)) {
      energy_.on_live_event(std::chrono::steady_clock::now().time_since_epoch().count());
    } else if (planner_) {
      planner_->add(p.index, e);
    }
  }

  void print_feed_summary() const {
    const std::vector<FeedProcess> procs = server_.processes();
    std::uint64_t bad_lines = 0;
    for (const auto& p : procs) bad_lines += p.bad_lines;
    if (bad_lines > 0)
      fmt::print(stderr, "gearshift run: {} launch feed line(s) were not valid events and were ignored\n", bad_lines);
    if (server_.refused() > 0)
      fmt::print(stderr, "gearshift run: {} connection(s) to the launch feed sent no valid hello and were closed\n",
                 server_.refused());
    if (procs.empty()) {
      fmt::print(stderr, "gearshift run: no CUDA process connected to the launch feed (no CUDA work, or the injection "
                         "library was not loaded: see any warning above)\n");
      return;
    }
    fmt::print(stderr, "gearshift run: {} CUDA process(es) connected to the launch feed{}:\n", procs.size(),
               server_.followed() >= 0 ? ""
                                       : fmt::format("; none followed: none launched kernels on GPU {} (--gpu)", o_.gpu));
    for (const auto& p : procs) fmt::print(stderr, "  {}\n", p.describe());
  }

  void print_stats(const runtime::SessionStats& ss) const {
    const runtime::LiveStats& st = ss.live;
    fmt::print(stderr,
               "gearshift run: {} ({}), L = {}\n"
               "  steps {}, launches {}, prediction accuracy after the first step {:.4f} %\n"
               "  clock changes {} made, {} dropped (late), {} merged, {} issued late\n"
               "  kernel time at the intended clocks{} {}\n"
               "  {}\n"
               "  {}\n"
               "  {}\n",
               ss.wrote_clocks ? "applied" : "dry-run", ss.wrote_clocks ? "NVML" : o_.dry_run_log,
               o_.switching.latency_ms ? fmt::format("{} ms", *o_.switching.latency_ms) : "none (no plan was made)",
               st.steps, st.launches, 100 * st.prediction_accuracy(), st.changes,
               st.dropped, st.merged, st.late, ss.wrote_clocks ? "" : " (would have run)",
               st.kernel_ns > 0 ? fmt::format("{:.2f} %", 100 * st.in_time_fraction())
                                : std::string("not measured (no kernel activity recorded while the plan ran)"),
               runtime::describe_boundary_errors(st.boundary_error_ns), progress_.summary(), energy_.summary(st.steps));
  }

  void write_timeline() const {
    try {
      const auto changes = session_.changes();
      const auto notes = write_run_timeline(o_.timeline, changes, o_.gpu, o_.trace_output, anchor_);
      fmt::print(stderr, "gearshift run: timeline written to {} ({} intended clock changes{})\n", o_.timeline,
                 changes.size(), session_.changes_lost() ? ", some lost: out of memory" : "");
      for (const auto& n : notes) fmt::print(stderr, "  note: {}\n", n);
    } catch (const trace::TraceError& e) {
      fmt::print(stderr, "gearshift run: timeline not written: {}\n", e.what());
    }
  }

  Opts& o_;
  RunPlan rp_;
  runtime::Session& session_;
  FeedServer server_;
  ProgressControl progress_;
  RunEnergy energy_;  // measured J per live step (NVML's counter, read only)
  std::unique_ptr<AutoPlanner> planner_;
  const bool follow_first_;
  std::optional<ClockAnchor> anchor_;  // the first completed kernel of the followed process (--timeline)
  std::string no_plan_;                // --auto: why no plan was made
};

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
  auto* cmd = app.add_subcommand("run", "Run a training job and apply a clock plan online (dry-run unless --apply)");
  cmd->add_option("--plan", o->plan, "plan.json from `gearshift plan -o`");
  cmd->add_flag("--auto", o->auto_plan, "Plan from the job's first steps (clocks untouched meanwhile), then apply");
  cmd->add_option("--max-slowdown", o->max_slowdown, "With --auto: step-time budget, e.g. 0.5% or 0.005");
  cmd->add_option("--warmup-steps", o->warmup_steps, "With --auto: steps to detect before planning (default 20)")
      ->check(CLI::Range(2, 100000));
  cmd->add_option("--warmup-timeout", o->warmup_timeout_s,
                  "With --auto: give up planning after this many seconds, s (default 600)")
      ->check(CLI::PositiveNumber);
  cmd->add_option("--gpu-spec", o->gpu_spec,
                  fmt::format("With --auto: GPU spec to plan for ({}; default: from NVML's name)",
                              fmt::join(gpu::spec_names(), ", ")));
  cmd->add_option("--plan-output", o->plan_output, "With --auto: also write the plan made (plan.json)");
  cmd->add_option("--model", o->model,
                  "With --auto: plan with this `gearshift calibrate` model file instead of the class priors");
  cmd->add_flag("--apply", o->apply, "Lock clocks through NVML (needs root or CAP_SYS_ADMIN); default: dry-run");
  cmd->add_flag("--lock-memory", o->lock_memory, "Also lock memory clocks where the GPU supports it");
  o->switching.add_to(cmd);
  cmd->add_option("--gpu", o->gpu, "NVML index of the GPU the job uses (default 0)");
  cmd->add_option("--dry-run-log", o->dry_run_log, "Intended changes, one JSON line each (dry-run and fallback)");
  cmd->add_option("--trace-output", o->trace_output,
                  "Also keep the job's trace (gearshift trace file, as `gearshift trace -o`); default: none");
  cmd->add_option("--timeline", o->timeline,
                  "Write the intended clock changes (and the traced kernels with --trace-output) as a Perfetto / "
                  "chrome://tracing timeline (Trace Event JSON, .gz: compressed)");
  cmd->add_option("--gpu-progress", o->progress_name,
                  "How the runtime follows the GPU: markers (a GPU write to host memory after one kernel every "
                  "5 ms, and the job's synchronizes; default), sync (the job's synchronizes only) or activity "
                  "(every kernel's activity record: costs the job 1-2 % on small kernels; implied by "
                  "--trace-output)")
      ->check(CLI::IsMember({"markers", "sync", "activity"}))
      ->type_name("markers|sync|activity");
  cmd->add_option("cmd", o->cmd, "-- CMD ARGS")->required();
  cmd->callback([o, cmd] {
    RunPlan rp = check_run_options(*o, *cmd);  // every usage error before the job starts
    runtime::Session session(session_options(*o));  // refusals: SessionError, exit codes in main.cpp
    // NVML's devices map each job process's CUDA ordinals to GPUs; a dry run without NVML maps plain indices.
    std::vector<gpu::DeviceInfo> infos;
    try {
      infos = open_gpus(false).infos;
    } catch (const Exit&) {
    }
    if (o->auto_plan) rp.ao.gpu_spec = auto_gpu_spec(o->gpu_spec, infos, o->gpu, o->apply);
    LiveRun run(*o, std::move(rp), session, std::move(infos));
    const ChildExit ce = run.run_job();
    const runtime::SessionStats ss = session.stop();  // restores the default clocks, releases the GPU
    run.print_summary(ss);
    if (!ce.started) throw Exit(ce.code, o->cmd[0] + ": " + ce.error);
    if (ce.code != 0) throw Exit(ce.code, fmt::format("{} exited with status {}", o->cmd[0], ce.code));
  });

  add_watchdog_command(app);
}

}  // namespace gearshift::cli
