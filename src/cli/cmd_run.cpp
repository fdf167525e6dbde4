// `gearshift run --plan plan.json [--apply] -- CMD ARGS`: runs the job and applies the plan online.
//
// The job's in-process hook streams launches and completed-kernel activity through the pipe named by
// GEARSHIFT_RUNTIME_FD (protocol: runtime/feed.hpp); it gets the CUPTI injection library as `gearshift trace`
// gives it; this process predicts positions, schedules the changes
// and actuates them from its runtime thread. Default is dry-run: every intended change goes to a log. With
// --apply it takes the GPU's lock, starts the watchdog and locks clocks through NVML; without permission it
// warns once and continues as dry-run. Clocks are restored when the job ends (normally, by a signal that
// reached us and was forwarded, or killed), by the watchdog when this process is killed.
#include <fcntl.h>
#include <poll.h>
#include <unistd.h>

#include <atomic>
#include <cstdlib>
#include <filesystem>
#include <thread>

#include <fmt/core.h>

#include "cli/child_process.hpp"
#include "cli/commands.hpp"
#include "cli/inject_library.hpp"
#include "cli/open_gpus.hpp"
#include "cli/switching_args.hpp"
#include "cupti/config.hpp"
#include "runtime/feed.hpp"
#include "runtime/live.hpp"
#include "runtime/safety.hpp"

namespace gearshift::cli {

namespace {

// Reads feed lines until `stop` is set and the pipe is drained.
void read_feed(int fd, runtime::LiveRuntime& rt, const std::atomic<bool>& stop) {
  std::string buf;
  char chunk[65536];
  for (;;) {
    pollfd p{fd, POLLIN, 0};
    int r = poll(&p, 1, 50);
    if (r < 0 && errno != EINTR) return;
    if (r <= 0) {
      if (stop.load()) return;
      continue;
    }
    ssize_t got = read(fd, chunk, sizeof chunk);
    if (got < 0 && errno == EINTR) continue;
    if (got <= 0) {
      if (stop.load() || got < 0) return;
      continue;
    }
    buf.append(chunk, static_cast<std::size_t>(got));
    std::size_t start = 0;
    for (std::size_t nl; (nl = buf.find('\n', start)) != std::string::npos; start = nl + 1)
      runtime::feed_line(std::string_view(buf).substr(start, nl - start), rt);
    buf.erase(0, start);
  }
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
  namespace fs = std::filesystem;
  const std::string out = fs::absolute(trace_output).string();
  std::error_code ec;
  // As `gearshift trace -o`: a stale file would send the library to FILE.<pid>; only a regular file is removed.
  if (fs::is_regular_file(out, ec)) fs::remove(out, ec);
  setenv(cupti::kEnvOutput, out.c_str(), 1);
  unsetenv(cupti::kEnvChrome);
}

std::string self_exe() {
  char path[4096];
  ssize_t n = readlink("/proc/self/exe", path, sizeof path - 1);
  if (n <= 0) throw Exit(kFailure, "cannot find the gearshift executable (/proc/self/exe)");
  return std::string(path, static_cast<std::size_t>(n));
}

}  // namespace

void add_run_command(CLI::App& app) {
  struct Opts {
    std::string plan, dry_run_log = "gearshift-dry-run.jsonl", max_slowdown, trace_output;
    bool apply = false, auto_plan = false, lock_memory = false;
    SwitchingArgs switching;
    unsigned gpu = 0;
    std::vector<std::string> cmd;
  };
  auto o = std::make_shared<Opts>();
  auto* cmd = app.add_subcommand("run", "Run a training job and apply a clock plan online (dry-run unless --apply)");
  cmd->add_option("--plan", o->plan, "plan.json from `gearshift plan -o`");
  cmd->add_flag("--auto", o->auto_plan, "Trace the first steps, plan, then apply (not implemented yet)");
  cmd->add_option("--max-slowdown", o->max_slowdown, "With --auto: step-time budget, e.g. 0.5%");
  cmd->add_flag("--apply", o->apply, "Lock clocks through NVML (needs root or CAP_SYS_ADMIN); default: dry-run");
  cmd->add_flag("--lock-memory", o->lock_memory, "Also lock memory clocks where the GPU supports it");
  o->switching.add_to(cmd);
  cmd->add_option("--gpu", o->gpu, "NVML index of the GPU the job uses (default 0)");
  cmd->add_option("--dry-run-log", o->dry_run_log, "Intended changes, one JSON line each (dry-run and fallback)");
  cmd->add_option("--trace-output", o->trace_output,
                  "Also keep the job's trace (gearshift trace file, as `gearshift trace -o`); default: none");
  cmd->add_option("cmd", o->cmd, "-- CMD ARGS")->required();
  cmd->callback([o] {
    if (o->auto_plan)
      throw Exit(kUsage, "--auto is not implemented yet: record with `gearshift trace`, plan with `gearshift plan "
                         "TRACE -o plan.json`, then `gearshift run --plan plan.json`");
    if (o->plan.empty()) throw Exit(kUsage, "run needs --plan plan.json");
    runtime::ClockPlan plan = load_plan_or_exit(o->plan);
    runtime::SchedulerOptions so = o->switching.resolve(plan);

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

    int feed[2];
    if (pipe(feed) != 0) throw Exit(kFailure, "cannot create the launch feed pipe");
    if (fcntl(feed[0], F_SETFD, FD_CLOEXEC) != 0) throw Exit(kFailure, "cannot set up the launch feed pipe");
    // Set before any thread starts (setenv is not thread-safe).
    setenv("GEARSHIFT_RUNTIME_FD", std::to_string(feed[1]).c_str(), 1);
    set_tracer_env(o->trace_output);

    runtime::LiveRuntime rt(plan, so, *act);
    std::atomic<bool> stop{false};
    std::thread reader([&] { read_feed(feed[0], rt, stop); });
    ChildExit ce = run_child(o->cmd);
    close(feed[1]);
    stop.store(true);
    reader.join();
    close(feed[0]);
    runtime::LiveStats st = rt.stop();  // restores the default clocks
    if (watchdog) watchdog->release();

    fmt::print(stderr,
               "gearshift run: {} ({}), L = {} ms\n"
               "  steps {}, launches {}, prediction accuracy after the first step {:.4f} %\n"
               "  clock changes {} made, {} dropped (late), {} merged, {} issued late\n"
               "  kernel time at the intended clocks{} {:.2f} %\n",
               o->apply && act->writes_clocks() ? "applied" : "dry-run", act->writes_clocks() ? "NVML" : o->dry_run_log,
               o->switching.latency_ms, st.steps, st.launches, 100 * st.prediction_accuracy(), st.changes, st.dropped, st.merged,
               st.late, act->writes_clocks() ? "" : " (would have run)", 100 * st.in_time_fraction());
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
