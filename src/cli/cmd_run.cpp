// `gearshift run --plan plan.json [--apply] -- CMD ARGS`: runs the job and applies the plan online.
// `gearshift run --auto --max-slowdown PCT [--apply] -- CMD ARGS`: plans from the job's first steps, then applies.
//
// The job gets the CUPTI injection library (as `gearshift run` gives it) and every CUDA process of it connects
// to our socket (GEARSHIFT_RUNTIME_SOCKET, feed_server.hpp; protocol: feed/protocol.hpp) and streams launches and
// completed-kernel activity; this process follows one of them (with --plan the first on --gpu that launches a
// kernel; with --auto the busiest on --gpu whose kernels give steps), predicts positions, schedules the changes
// and actuates them from its runtime thread. With --auto the feed is first only collected (auto_plan.hpp) until
// the plan exists. Default is dry-run: every intended change
// goes to a log. With --apply it takes the GPU's lock, starts the watchdog and locks clocks through NVML; without
// permission it warns once and continues as dry-run. Clocks are restored when the job ends (normally, by a
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

#include "cli/auto_plan.hpp"
#include "cli/child_process.hpp"
#include "cli/commands.hpp"
#include "cli/feed_server.hpp"
#include "cli/run_energy.hpp"
#include "cli/gpu_progress.hpp"
#include "cli/inject_library.hpp"
#include "cli/open_gpus.hpp"
#include "cli/plan_job.hpp"
#include "cli/run_timeline.hpp"
#include "cli/switching_args.hpp"
#include "cupti/config.hpp"
#include "feed/socket.hpp"
#include "gpu/cuda_visible.hpp"
#include "gpu/spec.hpp"
#include "runtime/feed.hpp"
#include "runtime/live.hpp"
#include "runtime/safety.hpp"
#include "trace/error.hpp"

namespace gearshift::cli {

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
std::string auto_gpu_spec(const std::string& given, const OpenedGpus& opened, unsigned index, bool apply) {
  if (!given.empty()) {
    try {
      return gpu::find_spec(given).name;
    } catch (const std::invalid_argument& e) {
      throw Exit(kUsage, std::string("--gpu-spec: ") + e.what());
    }
  }
  std::string device;  // empty: NVML has no GPU of that index
  if (index < opened.infos.size()) {
    device = opened.infos[index].name;
  } else {
    try {
      OpenedGpus g = open_gpus(false);
      if (index < g.infos.size()) device = g.infos[index].name;
    } catch (const Exit& e) {
      fmt::print(stderr, "gearshift run --auto: {}; planning for h200 (pass --gpu-spec to choose)\n", e.what());
      return "h200";
    }
  }
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

void add_run_command(CLI::App& app) {
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
    // Every usage error before the job starts.
    // A trace file records every kernel's activity anyway: the runtime may as well anchor on it.
    o->progress = !o->trace_output.empty() ? GpuProgress::activity : parse_gpu_progress(o->progress_name);
    AutoOptions ao;
    std::optional<runtime::ClockPlan> plan;  // --plan's, or --auto's once made
    runtime::SchedulerOptions so;
    if (o->auto_plan) {
      if (!o->plan.empty()) throw Exit(kUsage, "--plan and --auto exclude each other: --auto makes its own plan");
      if (o->max_slowdown.empty()) throw Exit(kUsage, "--auto needs --max-slowdown, e.g. --max-slowdown 0.5%");
      ao.max_slowdown = parse_slowdown(o->max_slowdown);
      ao.warmup_steps = o->warmup_steps;
      ao.timeout_s = o->warmup_timeout_s;
      if (o->switching.latency_ms >= 0) ao.switch_latency_ms = o->switching.latency_ms;
      if (!o->plan_output.empty()) {
        const auto dir = std::filesystem::absolute(o->plan_output).parent_path();
        std::error_code ec;
        if (!std::filesystem::is_directory(dir, ec))
          throw Exit(kUsage, fmt::format("--plan-output {}: directory {} does not exist", o->plan_output, dir.string()));
        ao.plan_output = o->plan_output;
      }
      ao.job_name = "launch feed of `" + o->cmd[0] + "` (gearshift run --auto)";
      if (!o->model.empty()) {
        ao.model = load_model_or_exit(o->model);
        ao.model_path = o->model;
        if (!o->gpu_spec.empty() && gpu::find_spec(o->gpu_spec).name != ao.model->gpu)
          throw Exit(kUsage, fmt::format("--model {} was calibrated on a {} GPU, --gpu-spec is {}", o->model,
                                         ao.model->gpu, o->gpu_spec));
      }
    } else {
      const std::pair<bool, const char*> auto_only[] = {
          {!o->max_slowdown.empty(), "--max-slowdown"}, {!o->plan_output.empty(), "--plan-output"},
          {!o->gpu_spec.empty(), "--gpu-spec"},         {cmd->count("--warmup-steps") > 0, "--warmup-steps"},
          {!o->model.empty(), "--model"},
          {cmd->count("--warmup-timeout") > 0, "--warmup-timeout"}};
      for (const auto& [given, name] : auto_only)
        if (given) throw Exit(kUsage, fmt::format("{} is for --auto (a --plan was made with its own)", name));
      if (o->plan.empty()) throw Exit(kUsage, "run needs --plan plan.json or --auto --max-slowdown PCT");
      plan = load_plan_or_exit(o->plan);
      so = o->switching.resolve(*plan);
      so.anchor_on_completions = o->progress == GpuProgress::activity;
    }

    std::unique_ptr<runtime::DryRunActuator> dry;
    try {
      dry = std::make_unique<runtime::DryRunActuator>(o->dry_run_log);
    } catch (const std::runtime_error& e) {
      throw Exit(kBadInput, e.what());
    }
    runtime::Actuator* act = dry.get();
    OpenedGpus gpus;
    std::unique_ptr<runtime::GpuLock> lock;
    std::unique_ptr<runtime::Watchdog> watchdog;
    std::unique_ptr<runtime::NvmlActuator> nvml_act;
    if (o->apply) {
      gpus = open_gpus(false);
      if (o->gpu >= gpus.devices.size())
        throw Exit(kUsage, fmt::format("--gpu {}: only {} GPU(s)", o->gpu, gpus.devices.size()));
    }
    if (o->auto_plan) ao.gpu_spec = auto_gpu_spec(o->gpu_spec, gpus, o->gpu, o->apply);
    if (o->apply) {
      const std::string uuid = gpus.infos[o->gpu].uuid;
      try {
        lock = std::make_unique<runtime::GpuLock>(uuid);
        watchdog = std::make_unique<runtime::Watchdog>(self_exe(), uuid, *lock, o->lock_memory);
      } catch (const runtime::GpuBusyError& e) {
        throw Exit(kNoPermission, e.what());
      } catch (const std::runtime_error& e) {
        throw Exit(kFailure, e.what());
      }
      nvml_act = std::make_unique<runtime::NvmlActuator>(gpus.devices[o->gpu], o->lock_memory, *dry);
      act = nvml_act.get();
    }
    std::unique_ptr<RecordingActuator> recorder;  // --timeline: every intended change, dry-run or applied
    if (!o->timeline.empty()) {
      const auto dir = std::filesystem::absolute(o->timeline).parent_path();
      std::error_code ec;
      if (!std::filesystem::is_directory(dir, ec))
        throw Exit(kUsage, fmt::format("--timeline {}: directory {} does not exist", o->timeline, dir.string()));
      recorder = std::make_unique<RecordingActuator>(*act);
      act = recorder.get();
    }
    std::optional<ClockAnchor> anchor;  // the first completed kernel of the followed process (--timeline)

    // NVML's devices map each job process's CUDA ordinals to GPUs; a dry run without NVML maps plain indices.
    std::vector<gpu::DeviceInfo> infos = gpus.infos;
    if (infos.empty()) {
      try {
        infos = open_gpus(false).infos;
      } catch (const Exit&) {
      }
    }
    // Every CUDA process of the job connects to this socket; its events reach `sink` (set below, before start).
    std::function<void(const FeedProcess&, const feed::FeedEvent&)> sink;
    FeedServer server(gpu_resolver(std::move(infos)), [&](const FeedProcess& p, const feed::FeedEvent& e) { sink(p, e); });
    ProgressControl progress(o->progress, [&](const std::string& line) {
      const std::int64_t f = server.followed();
      return f >= 0 && server.send(static_cast<std::uint32_t>(f), line);
    });
    // Set before any thread starts (setenv is not thread-safe).
    setenv(feed::kEnvSocket, server.socket_path().c_str(), 1);
    progress.set_job_env(/*collect_first=*/o->auto_plan);
    ao.measure_untraced = progress.may_stop_recording();
    set_tracer_env(o->trace_output);

    RunEnergy energy(o->gpu);  // measured J per live step (NVML's counter, read only)
    // The threads below inherit the blocked signals, so that run_child's wait takes every forwarded signal.
    std::optional<ForwardedSignalsBlocked> blocked;
    blocked.emplace();
    // The runtime the reader feeds; published once it exists (at once with --plan, after the warm-up with --auto).
    std::unique_ptr<runtime::LiveRuntime> rt;
    std::atomic<runtime::LiveRuntime*> live{nullptr};
    std::unique_ptr<AutoPlanner> planner;
    const unsigned run_gpu = o->gpu;
    auto on_run_gpu = [&](const FeedProcess& p) { return p.gpu && *p.gpu == run_gpu; };
    if (plan) {
      progress.set_template_kernels(plan->kernels_only().size());
      rt = std::make_unique<runtime::LiveRuntime>(*plan, so, *act);
      live.store(rt.get());
    } else {
      // Runs on the planner's thread; the main thread reads plan, so and rt only after joining it (finish()).
      planner = std::make_unique<AutoPlanner>(
          ao,
          [&](const runtime::ClockPlan& made, std::uint32_t source) {
            server.follow(source, progress.others_commands());
            plan = made;
            so = o->switching.resolve(*plan);
            so.anchor_on_completions = progress.anchor_on_completions();
            progress.set_template_kernels(plan->kernels_only().size());
            rt = std::make_unique<runtime::LiveRuntime>(*plan, so, *act);
            progress.plan_ready(*rt, server.process(source).syncs);
            live.store(rt.get());
          },
          [&](std::uint32_t source) { return on_run_gpu(server.process(source)); },
          [&](std::uint32_t source) {
            if (!server.send(source, progress.stop_recording_command()))
              fmt::print(stderr, "gearshift run: note: could not tell the job to stop recording every kernel\n");
          });
    }
    // The reader thread: with --plan the first process on the run's GPU to launch a kernel is followed; events of
    // the processes not followed are counted (by the server), not applied.
    const bool follow_first = static_cast<bool>(plan);
    sink = [&](const FeedProcess& p, const feed::FeedEvent& e) {
      std::int64_t f = server.followed();
      if (f < 0 && follow_first && e.kind == feed::FeedEvent::Kind::launch && on_run_gpu(p)) {
        server.follow(p.index, progress.others_commands());
        f = server.followed();
      }
      // Not followed (another process followed, or --plan's process not found yet): counted, not applied.
      if ((f >= 0 && f != p.index) || (f < 0 && follow_first)) return;
      if (recorder && !anchor && f >= 0 && e.kind == feed::FeedEvent::Kind::complete)
        anchor = ClockAnchor{p.hello.pid, e.correlation & 0xffff'ffff, e.gpu_start_ns, e.gpu_end_ns - e.gpu_start_ns};
      runtime::LiveRuntime* r = live.load();
      if (f >= 0) progress.on_event(e, r);
      if (r != nullptr) {
        runtime::feed_event(e, *r);
        energy.on_live_event(std::chrono::steady_clock::now().time_since_epoch().count());
      } else if (planner) {
        planner->add(p.index, e);
      }
    };
    server.start();
    ChildExit ce = run_child(o->cmd);
    blocked.reset();
    server.stop();  // reads what the job's processes still sent, then removes the socket's directory
    const std::string no_plan = planner ? planner->finish() : std::string();
    const std::vector<FeedProcess> procs = server.processes();
    std::uint64_t bad_lines = 0;
    for (const auto& p : procs) bad_lines += p.bad_lines;
    if (bad_lines > 0)
      fmt::print(stderr, "gearshift run: {} launch feed line(s) were not valid events and were ignored\n", bad_lines);
    if (server.refused() > 0)
      fmt::print(stderr, "gearshift run: {} connection(s) to the launch feed sent no valid hello and were closed\n",
                 server.refused());
    if (procs.empty()) {
      fmt::print(stderr, "gearshift run: no CUDA process connected to the launch feed (no CUDA work, or the injection "
                         "library was not loaded: see any warning above)\n");
    } else {
      fmt::print(stderr, "gearshift run: {} CUDA process(es) connected to the launch feed{}:\n", procs.size(),
                 server.followed() >= 0 ? ""
                                        : fmt::format("; none followed: none launched kernels on GPU {} (--gpu)", run_gpu));
      for (const auto& p : procs) fmt::print(stderr, "  {}\n", p.describe());
    }
    if (rt) {
      runtime::LiveStats st = rt->stop();  // restores the default clocks
      fmt::print(stderr,
                 "gearshift run: {} ({}), L = {} ms\n"
                 "  steps {}, launches {}, prediction accuracy after the first step {:.4f} %\n"
                 "  clock changes {} made, {} dropped (late), {} merged, {} issued late\n"
                 "  kernel time at the intended clocks{} {}\n"
                 "  {}\n"
                 "  {}\n"
                 "  {}\n",
                 o->apply && act->writes_clocks() ? "applied" : "dry-run",
                 act->writes_clocks() ? "NVML" : o->dry_run_log, o->switching.latency_ms, st.steps, st.launches,
                 100 * st.prediction_accuracy(), st.changes, st.dropped, st.merged, st.late,
                 act->writes_clocks() ? "" : " (would have run)",
                 st.kernel_ns > 0 ? fmt::format("{:.2f} %", 100 * st.in_time_fraction())
                                  : std::string("not measured (no kernel activity recorded while the plan ran)"),
                 runtime::describe_boundary_errors(st.boundary_error_ns), progress.summary(), energy.summary(st.steps));
    } else {
      fmt::print(stderr, "gearshift run --auto: {}\n", no_plan);
    }
    if (recorder) {
      try {
        const auto notes = write_run_timeline(o->timeline, recorder->changes(), o->gpu, o->trace_output, anchor);
        fmt::print(stderr, "gearshift run: timeline written to {} ({} intended clock changes{})\n", o->timeline,
                   recorder->changes().size(), recorder->lost() ? ", some lost: out of memory" : "");
        for (const auto& n : notes) fmt::print(stderr, "  note: {}\n", n);
      } catch (const trace::TraceError& e) {
        fmt::print(stderr, "gearshift run: timeline not written: {}\n", e.what());
      }
    }
    if (watchdog) watchdog->release();
    if (!ce.started) throw Exit(ce.code, o->cmd[0] + ": " + ce.error);
    if (ce.code != 0) throw Exit(ce.code, fmt::format("{} exited with status {}", o->cmd[0], ce.code));
  });

  // The watchdog process (started by `run --apply`; not for people).
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

}  // namespace gearshift::cli
