#include "service/live_run.hpp"

#include <algorithm>
#include <chrono>
#include <memory>
#include <cstdlib>
#include <utility>

#include <fmt/core.h>
#include <fmt/format.h>

#include "cupti/config.hpp"
#include "feed/socket.hpp"
#include "gpu/open_gpus.hpp"
#include "gpu/spec.hpp"
#include "launch/inject_library.hpp"
#include "runtime/live.hpp"
#include "service/error.hpp"
#include "trace/error.hpp"

namespace gearshift::service {

std::string auto_gpu_spec(const std::string& given, const std::vector<gpu::DeviceInfo>& infos, unsigned index,
                          bool apply, const ProgressSink& progress_sink) {
  if (!given.empty()) {
    try {
      return gpu::find_spec(given).name;
    } catch (const std::invalid_argument& e) {
      throw ServiceError(ServiceError::Kind::kBadArgument, std::string("--gpu-spec: ") + e.what());
    }
  }
  if (infos.empty()) {
    say(progress_sink, "gearshift run --auto: NVML is not at hand; planning for h200 (pass --gpu-spec to choose)");
    return "h200";
  }
  const std::string device = index < infos.size() ? infos[index].name : "";  // empty: no GPU of that index
  if (device.empty()) {
    say(progress_sink,
        fmt::format("gearshift run --auto: NVML has no GPU {}; planning for h200 (pass --gpu-spec to choose)", index));
    return "h200";
  }
  std::string other_board;
  std::string name = gpu::spec_name_for_device(device, &other_board);
  if (!name.empty()) return name;
  if (!other_board.empty()) other_board = " (" + other_board + ")";
  if (apply)
    throw ServiceError(ServiceError::Kind::kBadArgument,
                       fmt::format("GPU {} ('{}') has no spec to plan with{}; pass --gpu-spec (known: {}) if it is "
                                   "one of those",
                                   index, device, other_board, fmt::join(gpu::spec_names(), ", ")));
  say(progress_sink,
      fmt::format("gearshift run --auto: no spec for GPU {} ('{}'){}; planning for h200 (pass --gpu-spec to choose)",
                  index, device, other_board));
  return "h200";
}

namespace {

// The job's environment for the tracer: the injection library (so that an unmodified CUDA job feeds us) and,
// with --trace-output, the trace file it also writes. Before any thread starts (setenv is not thread-safe).
void set_tracer_env(const std::string& trace_output, const ProgressSink& sink) {
  try {
    launch::set_injection_env(launch::find_inject_library());
  } catch (const launch::LaunchError& e) {
    // Not fatal: the job may carry its own hook (the Python package) that writes the feed.
    say(sink, fmt::format("gearshift run: warning: {}; the job is not traced unless it has its own gearshift hook",
                          e.what()));
  }
  if (trace_output.empty()) {
    unsetenv(cupti::kEnvOutput);  // feed only: no trace file unless asked for
    return;
  }
  launch::set_trace_output_env(trace_output);
}

// The run GPU's clocks for --auto's warm-up (service/warmup_clocks.hpp): NVML opened once, read only; empty where
// NVML or that GPU cannot be opened (the template then takes the spec's clocks, as before).
ReadClocks run_gpu_clocks(unsigned nvml_index) {
  std::shared_ptr<gpu::OpenedGpus> g;
  try {
    g = std::make_shared<gpu::OpenedGpus>(gpu::open_gpus(false));
  } catch (const gpu::OpenError&) {
    return {};
  }
  if (nvml_index >= g->devices.size()) return {};
  return [g, nvml_index]() -> std::optional<ClockReading> {
    const gpu::Device& d = g->devices[nvml_index];
    auto sm = d.sm_clock_mhz();
    if (!sm) return std::nullopt;
    auto mem = d.mem_clock_mhz();
    return ClockReading{static_cast<int>(sm.value()), mem ? static_cast<int>(mem.value()) : 0};
  };
}

}  // namespace

LiveRun::LiveRun(LiveRunOptions o, runtime::Session& session, std::vector<gpu::DeviceInfo> infos)
    : o_(std::move(o)),
      session_(session),
      server_(runtime::gpu_resolver(std::move(infos)),
              [this](const runtime::FeedProcess& p, const feed::FeedEvent& e) { on_event(p, e); }),
      progress_(o_.progress,
                [this](const std::string& line) {
                  const std::int64_t f = server_.followed();
                  return f >= 0 && server_.send(static_cast<std::uint32_t>(f), line);
                }),
      energy_(o_.gpu),
      follow_first_(static_cast<bool>(o_.plan)) {
  if (o_.plan) {
    so_ = scheduler_options(*o_.plan, o_.switching);
    so_.anchor_on_completions = o_.progress == runtime::GpuProgress::activity;
  }
}

LiveRun::~LiveRun() = default;

launch::ChildExit LiveRun::run_job() {
  // Set before any thread starts (setenv is not thread-safe).
  setenv(feed::kEnvSocket, server_.socket_path().c_str(), 1);
  const bool auto_plan = !o_.plan;
  progress_.set_job_env(/*collect_first=*/auto_plan);
  o_.ao.measure_untraced = progress_.may_stop_recording();
  // --auto calibrates to the untraced run's power
  o_.ao.energy = [this](bool at_tick) { return energy_.counter(at_tick); };
  if (auto_plan) o_.ao.clocks = run_gpu_clocks(o_.gpu);
  if (!o_.ao.progress_sink) o_.ao.progress_sink = o_.progress_sink;  // one sink for the run's lines
  set_tracer_env(o_.trace_output, o_.progress_sink);
  // The threads below inherit the blocked signals, so that run_child's wait takes every forwarded signal.
  std::optional<launch::ForwardedSignalsBlocked> blocked;
  blocked.emplace();
  if (o_.plan) {
    progress_.set_plan(o_.plan->kernels_only());
    start_verifier(*o_.plan);
    session_.start(*o_.plan, so_);
  } else {
    planner_ = std::make_unique<AutoPlanner>(
        o_.ao, [this](const runtime::ClockPlan& made, std::uint32_t source) { on_plan(made, source); },
        [this](std::uint32_t source) { return on_run_gpu(server_.process(source)); },
        [this](std::uint32_t source) {
          if (!server_.send(source, progress_.stop_recording_command()))
            say(o_.progress_sink, "gearshift run: note: could not tell the job to stop recording every kernel");
        },
        // Nothing will be followed: every process's callbacks and kernel activity off (they cost the job ~3 %
        // of a CPU-bound step; bench/results/2026-12-03-overhead.md, session 17).
        [this] { server_.tell_all(feed::off_command()); });
  }
  server_.start();
  launch::ChildExit ce = launch::run_child(o_.cmd);
  blocked.reset();
  server_.stop();  // reads what the job's processes still sent, then removes the socket's directory
  no_plan_ = planner_ ? planner_->finish() : std::string();
  if (LiveVerifier* v = verifier_.load()) v->stop();
  return ce;
}

std::string LiveRun::summary(const runtime::SessionStats& ss) const {
  std::string out = feed_summary();
  if (ss.started) out += stats(ss);
  else out += fmt::format("gearshift run --auto: {}\n", no_plan_);
  if (!o_.timeline.empty()) out += write_timeline();
  return out;
}

// --auto's plan is made: on the planner's thread; the main thread reads o_.plan only after joining it (finish()).
void LiveRun::on_plan(const runtime::ClockPlan& made, std::uint32_t source) {
  server_.follow(source, progress_.others_commands());
  o_.plan = made;
  so_ = scheduler_options(*o_.plan, o_.switching);
  so_.anchor_on_completions = progress_.anchor_on_completions();
  progress_.set_plan(o_.plan->kernels_only());
  start_verifier(*o_.plan);
  session_.start(*o_.plan, so_);
  progress_.plan_ready(*session_.live(), server_.process(source).syncs);
}

// Before the session starts: the verifier over the positions the runtime follows (kernels only), the GPU spec's
// supported clocks and counter period. Without --verify, or for a plan whose spec is unknown, none (said).
void LiveRun::start_verifier(const runtime::ClockPlan& plan) {
  verifier_owner_ = make_live_verifier(o_.verify, plan, session_.options().apply,
                                       [this] { return energy_.counter(true); },
                                       [this](std::string_view l) { say(o_.progress_sink, std::string(l)); },
                                       clocks_read(energy_));
  verifier_.store(verifier_owner_.get());
}

std::string LiveRun::prometheus_text() const {
  const LiveVerifier* v = verifier_.load();
  return v ? v->prometheus_text() : std::string("# gearshift: no measured verification yet (no plan followed, or --no-verify)\n");
}

// The feed reader's thread: events of the processes not followed are counted (by the server), not applied.
void LiveRun::on_event(const runtime::FeedProcess& p, const feed::FeedEvent& e) {
  std::int64_t f = server_.followed();
  if (f < 0 && follow_first_ && e.kind == feed::FeedEvent::Kind::launch && on_run_gpu(p)) {
    server_.follow(p.index, progress_.others_commands());
    f = server_.followed();
  }
  // Not followed (another process followed, or --plan's process not found yet): counted, not applied.
  if ((f >= 0 && f != p.index) || (f < 0 && follow_first_)) return;
  if (!o_.timeline.empty() && !anchor_ && f >= 0 && e.kind == feed::FeedEvent::Kind::complete)
    anchor_ = report::ClockAnchor{p.hello.pid, e.correlation & 0xffff'ffff, e.gpu_start_ns, e.gpu_end_ns - e.gpu_start_ns};
  if (f >= 0) progress_.on_event(e, session_.live());
  if (session_.feed(e)) {
    if (const runtime::LiveRuntime* rt = session_.live()) on_live_event(*rt);
  } else if (planner_) {
    planner_->add(p.index, e);
  }
}

// After each event the runtime took: J per step from the first step end after the plan began (its first anchor;
// the default clocks ran before), and a plan of one pair's feed (or the in-time guard's fall-back pair's) turned off
// once set and followed long enough.
void LiveRun::on_live_event(const runtime::LiveRuntime& rt) {
  if (!rt.anchored()) return;
  const std::int64_t now = std::chrono::steady_clock::now().time_since_epoch().count();
  const std::uint64_t steps = rt.steps();
  energy_.on_live_event(now, steps);
  LiveVerifier* v = verifier_.load();
  if (v) v->poll(session_, now);
  // The in-time guard's fall-back leaves one clock pair for the whole step: followed as a plan of one pair is.
  if (rt.fell_back()) progress_.fell_back_to_one_pair();
  if (!progress_.one_pair() || progress_.feed_off() || !o_.trace_output.empty() || !rt.locked()) return;
  if (v && v->needs_steps()) return;  // verification counts the job's steps: the feed stays on until its verdict
  if (pair_set_ns_ < 0) {
    pair_set_ns_ = now;
    pair_set_step_ = steps;
  }
  // Two step ends at least since: a step whole within the energy counter's window.
  if (now - pair_set_ns_ >= o_.one_pair_follow_ns && steps >= pair_set_step_ + 2)
    progress_.turn_feed_off(steps, now - pair_set_ns_);
}

std::string LiveRun::feed_summary() const {
  const std::vector<runtime::FeedProcess> procs = server_.processes();
  std::string out;
  std::uint64_t bad_lines = 0;
  for (const auto& p : procs) bad_lines += p.bad_lines;
  if (bad_lines > 0)
    out += fmt::format("gearshift run: {} launch feed line(s) were not valid events and were ignored\n", bad_lines);
  if (server_.refused() > 0)
    out += fmt::format("gearshift run: {} connection(s) to the launch feed sent no valid hello and were closed\n",
                       server_.refused());
  if (procs.empty())
    return out + "gearshift run: no CUDA process connected to the launch feed (no CUDA work, or the injection "
                 "library was not loaded: see any warning above)\n";
  // Nothing followed: no process launched on the run's GPU, or (--auto) one did and no plan was made for it.
  const bool launched_here = std::any_of(procs.begin(), procs.end(), [&](const runtime::FeedProcess& p) {
    return p.launches > 0 && p.gpu && *p.gpu == o_.gpu;
  });
  out += fmt::format("gearshift run: {} CUDA process(es) connected to the launch feed{}:\n", procs.size(),
                     server_.followed() >= 0 ? ""
                     : launched_here ? "; none followed: no plan was made (said above), each was told to turn its "
                                       "launch feed off, and the job ran untouched"
                                     : fmt::format("; none followed: none launched kernels on GPU {} (--gpu)", o_.gpu));
  for (const auto& p : procs) out += fmt::format("  {}\n", p.describe());
  return out;
}

namespace {

// The predictor's figure, or why there is none. A figure over a step or two says little: on the H200 (session 27)
// a MoE job ended 3 steps after its plan was taken and the summary read "95.9549 %" beside "steps 3".
std::string prediction_figure(const runtime::LiveStats& st) {
  constexpr std::uint64_t kFewSteps = 10;
  if (st.scored == 0) return "not measured (no launch after the first step was followed)";
  std::string s = fmt::format("{:.4f} %", 100 * st.prediction_accuracy());
  if (st.steps < kFewSteps)
    s += fmt::format(" (over {} whole step(s), fewer than {}: too few to judge the predictor)", st.steps, kFewSteps);
  return s;
}

// The in-time fraction with how much kernel time it rests on: activity is sampled (200 of every 5,000 ms), so a
// short run scores a fraction of a step (H200, session 27: Megatron-LM "96.04 %" where the guard had no window).
std::string in_time_figure(const runtime::LiveStats& st, double plan_kernel_ns) {
  std::string s = fmt::format("{:.2f} %", 100 * st.in_time_fraction());
  if (plan_kernel_ns <= 0) return s;
  const double steps = st.kernel_ns / plan_kernel_ns;
  s += fmt::format(" (of {:.1f} steps' kernel time{})", steps,
                   steps < runtime::kGuardMinKernelSteps ? ": too little to judge" : "");
  return s;
}

}  // namespace

std::string LiveRun::stats(const runtime::SessionStats& ss) const {
  const runtime::LiveStats& st = ss.live;
  const LiveVerifier* v = verifier_.load();
  return fmt::format(
      "gearshift run: {} ({}), L = {}\n"
      "{}"
      "  steps {}, launches {}, prediction accuracy after the first step {}\n"
      "  clock changes {} made, {} dropped (late), {} merged, {} issued late\n"
      "  kernel time at the intended clocks{} {}\n"
      "{}"
      "  {}\n"
      "  {}\n"
      "  {}\n",
      ss.wrote_clocks ? "applied" : "dry-run", ss.wrote_clocks ? "NVML" : o_.dry_run_log,
      o_.switching.latency_ns ? fmt::format("{} ms", *o_.switching.latency_ns / 1e6) : "none (no plan was made)",
      v ? v->summary() : std::string("  measured verification: off (--no-verify)\n"), st.steps,
      st.launches, prediction_figure(st), st.changes, st.dropped, st.merged, st.late,
      ss.wrote_clocks ? "" : " (would have run)",
      st.kernel_ns > 0 ? in_time_figure(st, o_.plan ? o_.plan->kernel_ns_per_step() : 0)
      : progress_.one_pair()
          ? std::string("not measured: one clock pair for the whole step, no change inside it to be late (no kernel "
                        "activity was sampled)")
          : std::string("not measured (no kernel activity recorded while the plan ran)"),
      guard_line(st), runtime::describe_boundary_errors(st.boundary_error_ns), progress_.summary(), energy_.summary());
}

// The in-time guard's outcome (runtime/runtime_core.hpp); "" for a plan without one (`run --plan`).
std::string LiveRun::guard_line(const runtime::LiveStats& st) const {
  if (!o_.plan || !o_.plan->in_time_fallback) return {};
  if (!st.fell_back && st.guard_windows == 0)
    return fmt::format("  in-time guard: no verdict: no window of {} steps and {:g} steps' kernel time sampled "
                       "completed while the plan ran\n",
                       runtime::kGuardWindowSteps, runtime::kGuardMinKernelSteps);
  if (!st.fell_back)
    return fmt::format("  in-time guard: held ({} window(s) of at least {} steps, none below {:.0f} %)\n",
                       st.guard_windows, runtime::kGuardWindowSteps, 100 * runtime::kMinInTime);
  const model::ClockPair& c = *o_.plan->in_time_fallback;
  const double after_k = st.kernel_ns - st.kernel_ns_before_fallback;
  // Kernel time sampled after the fall-back is said only when it holds as much as a guard window needs: the
  // windows in flight when sampling stopped hold a fraction of a step, the change to the pair landing in it
  // (H200, session 24: "81.07 % after" on Megatron-LM, "41.59 %" on the MoE).
  const double plan_kernel_ns = o_.plan->kernel_ns_per_step();
  const bool after_enough = after_k > 0 && after_k >= runtime::kGuardMinKernelSteps * plan_kernel_ns;
  const double after_t = st.in_time_ns - st.in_time_ns_before_fallback;
  return fmt::format(
      "  in-time guard: FELL BACK at step {}: {:.2f} % of the kernel time of the {} steps before ran at the plan's "
      "clocks (below {:.0f} %); from then on one clock pair for the whole step, SM {} MHz, memory {} MHz, so the "
      "phase plan's MODELLED saving no longer applies (the one-pair plan's, said when planning, does); kernel time "
      "at the intended clocks {:.2f} % before, {} after\n",
      st.fell_back_at_step, 100 * st.fell_back_window_in_time, st.fell_back_window_steps, 100 * runtime::kMinInTime,
      c.sm_mhz, c.mem_mhz,
      st.kernel_ns_before_fallback > 0 ? 100 * st.in_time_ns_before_fallback / st.kernel_ns_before_fallback : 0.0,
      after_enough           ? fmt::format("{:.2f} %", 100 * after_t / after_k)
      : progress_.one_pair() ? std::string("not measured (no change inside the step to be late, no activity sampled)")
      : after_k > 0          ? fmt::format("not measured ({:.2f} steps' kernel time sampled, fewer than {:g})",
                                           after_k / plan_kernel_ns, runtime::kGuardMinKernelSteps)
                             : std::string("not measured"));
}

std::string LiveRun::write_timeline() const {
  try {
    const auto changes = session_.changes();
    const LiveVerifier* v = verifier_.load();
    const auto notes = report::write_run_timeline(o_.timeline, changes, o_.gpu, o_.trace_output, anchor_,
                                                  v ? v->arm_track() : std::vector<std::pair<std::int64_t, double>>{});
    std::string out = fmt::format("gearshift run: timeline written to {} ({} intended clock changes{})\n", o_.timeline,
                                  changes.size(), session_.changes_lost() ? ", some lost: out of memory" : "");
    for (const auto& n : notes) out += fmt::format("  note: {}\n", n);
    return out;
  } catch (const trace::TraceError& e) {
    return fmt::format("gearshift run: timeline not written: {}\n", e.what());
  }
}

}  // namespace gearshift::service
