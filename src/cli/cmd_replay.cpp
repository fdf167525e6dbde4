// `gearshift replay TRACE --plan plan.json`: the online runtime (predictor + scheduler) on a recorded trace's
// launch stream in virtual time, optionally perturbed. No GPU needed; this is how CI tests the runtime.
#include <fmt/core.h>

#include <nlohmann/json.hpp>

#include "cli/commands.hpp"
#include "runtime/gpu_progress.hpp"
#include "cli/switching_args.hpp"
#include "runtime/replay.hpp"
#include "trace/error.hpp"
#include "trace/gearshift_format.hpp"
#include "trace/iteration.hpp"

namespace gearshift::cli {

void add_replay_command(CLI::App& app) {
  struct Opts {
    std::string trace, plan, perturb, dry_run_log, progress = "activity";
    service::Switching switching;
    double cpu_lead_ms = 2, activity_delay_ms = 1, activity_period_ms = 0, activity_window_ms = 0;
    double marker_period_us = static_cast<double>(runtime::kMarkerPeriodNs) / 1e3;
    double feed_period_us = 500;
    std::uint64_t seed = 1;
    bool json = false, assume_sync_each_step = false;
  };
  auto o = std::make_shared<Opts>();
  auto* cmd = app.add_subcommand("replay", "Replay a trace's launch stream through the online runtime (virtual time, no GPU)");
  cmd->add_option("trace", o->trace, "Trace (.json, .json.gz, gearshift format)")->required();
  cmd->add_option("--plan", o->plan, "plan.json from `gearshift plan -o`")->required();
  cmd->add_option("--perturb", o->perturb, "drop=P,insert=P,swap=P (probability per launch, 0..1 or N%)");
  add_switching_options(cmd, o->switching);
  cmd->add_option("--cpu-lead-ms", o->cpu_lead_ms, "CPU launch lead over the GPU when the trace lacks launch times, ms")
      ->check(finite_range(0, kMaxOptionMs));
  cmd->add_option("--activity-delay-ms", o->activity_delay_ms, "Delay of activity records after a kernel ends, ms")
      ->check(finite_range(0, kMaxOptionMs));
  cmd->add_option("--activity-period-ms", o->activity_period_ms,
                  "Sampled activity: completions only for kernels starting in the first --activity-window-ms of "
                  "each period, ms (0: all)")
      ->check(finite_range(0, kMaxOptionMs));
  cmd->add_option("--activity-window-ms", o->activity_window_ms, "Sampled activity: window per period, ms")
      ->check(finite_range(0, kMaxOptionMs));
  cmd->add_option("--gpu-progress", o->progress,
                  "activity (default: every kernel's completion anchors), sync (the job's synchronizes anchor: "
                  "the trace's own when it recorded them, else one assumed at the end of each step) or markers "
                  "(that, and a stream marker every --marker-period-us, as `gearshift run`'s default)")
      ->check(CLI::IsMember({"markers", "sync", "activity"}))
      ->type_name("markers|sync|activity");
  cmd->add_option("--marker-period-us", o->marker_period_us,
                  fmt::format("With --gpu-progress markers: one marker at most every this long, µs (default {})",
                              runtime::kMarkerPeriodNs / 1'000))
      ->check(CLI::PositiveNumber & finite_range(0, kMaxOptionMs * 1e3));
  cmd->add_flag("--assume-sync-each-step", o->assume_sync_each_step,
               "With --gpu-progress sync|markers: one synchronize at the end of every step, even when the trace "
               "recorded the job's own");
  cmd->add_option("--feed-period-us", o->feed_period_us,
                  "The launch feed's batching period: events reach the runtime at its next tick, µs (default 500, "
                  "as `gearshift run`; 0: at once)")
      ->check(finite_range(0, kMaxOptionMs * 1e3));
  cmd->add_option("--seed", o->seed, "Perturbation seed");
  cmd->add_option("--dry-run-log", o->dry_run_log, "Append every intended change to this JSONL file");
  cmd->add_flag("--json", o->json, "Print one JSON object");
  cmd->callback([o] {
    if (o->activity_period_ms < 0 || o->activity_window_ms < 0 ||
        (o->activity_period_ms > 0 && (o->activity_window_ms <= 0 || o->activity_window_ms > o->activity_period_ms)))
      throw Exit(kUsage, "--activity-window-ms must be in (0, --activity-period-ms]");
    runtime::ReplayOptions ro;
    runtime::ClockPlan plan = service::load_live_plan(o->plan);
    try {
      ro.perturb = runtime::parse_perturbation(o->perturb);
    } catch (const std::invalid_argument& e) {
      throw Exit(kUsage, e.what());
    }
    ro.scheduler = service::scheduler_options(plan, o->switching);
    if (o->cpu_lead_ms < 0 || o->activity_delay_ms < 0) throw Exit(kUsage, "latencies must be >= 0 ms");
    ro.activity_period_ns = o->activity_period_ms * 1e6;
    ro.activity_window_ns = o->activity_window_ms * 1e6;
    ro.perturb.seed = o->seed;
    ro.sync_progress = o->progress == "sync" || o->progress == "markers";
    ro.assume_sync_each_step = o->assume_sync_each_step;
    ro.feed_period_ns = o->feed_period_us * 1e3;
    if (o->progress == "markers") ro.marker_period_ns = o->marker_period_us * 1e3;
    ro.cpu_lead_ns = o->cpu_lead_ms * 1e6;
    ro.activity_delay_ns = o->activity_delay_ms * 1e6;
    trace::Trace t;
    try {
      t = trace::import_trace(o->trace);
    } catch (const trace::TraceError& e) {
      throw Exit(kBadInput, e.what());
    }
    std::unique_ptr<runtime::DryRunActuator> log;
    if (!o->dry_run_log.empty()) {
      try {
        log = std::make_unique<runtime::DryRunActuator>(o->dry_run_log);
      } catch (const std::runtime_error& e) {
        throw Exit(kBadInput, e.what());
      }
    }
    runtime::ReplayResult r;
    try {
      r = runtime::replay(t, plan, ro, log.get());
    } catch (const trace::NoIterationError& e) {
      throw Exit(kNoIteration, e.what());
    } catch (const runtime::PlanMismatchError& e) {
      throw Exit(kBadInput, fmt::format("{}: {}", o->plan, e.what()));
    }
    // Which synchronizes anchored, in words: the figures mean little without it.
    std::string progress = "every kernel's completion (activity)";
    if (r.sync_source == runtime::SyncSource::trace)
      progress = fmt::format("the trace's {} synchronizes{}", r.syncs_used,
                             r.syncs_ignored ? fmt::format(" ({} event or other-device ones left out)", r.syncs_ignored) : "");
    else if (r.sync_source == runtime::SyncSource::assumed_each_step)
      progress = o->assume_sync_each_step
                     ? fmt::format("one synchronize assumed at the end of every step ({}; --assume-sync-each-step)", r.syncs_used)
                     : fmt::format("one synchronize assumed at the end of every step ({}): the trace does not record "
                                   "the job's synchronizes ({})",
                                   r.syncs_used, t.format);
    if (r.sync_source != runtime::SyncSource::none && ro.marker_period_ns > 0)
      progress += fmt::format(" and {} stream markers", r.markers);
    if (o->json) {
      nlohmann::json j = {{"prediction_accuracy", r.prediction_accuracy},
                          {"strict_position_accuracy", r.strict_position_accuracy},
                          {"next_kernel_accuracy", r.next_kernel_accuracy},
                          {"live_prediction_accuracy", r.live_prediction_accuracy},
                          {"in_time_fraction", r.in_time_fraction},
                          {"changes", r.changes},
                          {"dropped_changes", r.dropped_changes},
                          {"merged_changes", r.merged_changes},
                          {"late_changes", r.late_changes},
                          {"steps", r.steps},
                          {"launches", r.launches},
                          {"scored_launches", r.scored_launches},
                          {"perturbed", {{"dropped", r.dropped_ops}, {"inserted", r.inserted_ops}, {"swapped", r.swapped_ops}}},
                          {"relocks", r.relocks},
                          {"lock_losses", r.losses},
                          {"switch_latency_ms", *o->switching.latency_ns / 1e6},
                          {"gpu_progress", {{"mode", o->progress},
                                            {"syncs", runtime::to_string(r.sync_source)},
                                            {"syncs_used", r.syncs_used},
                                            {"syncs_ignored", r.syncs_ignored},
                                            {"markers", r.markers},
                                            {"feed_period_us", o->feed_period_us},
                                            {"said", "GPU progress from " + progress}}},
                          {"modelled", "virtual time from the trace"}};
      fmt::print("{}\n", j.dump());
      return;
    }
    fmt::print("replay {} with {} ({} positions), L = {} ms (virtual time)\n", o->trace, o->plan, plan.size(), *o->switching.latency_ns / 1e6);
    fmt::print("  launches {} (dropped {}, inserted {}, swapped {}), steps {}\n", r.launches, r.dropped_ops,
               r.inserted_ops, r.swapped_ops, r.steps);
    fmt::print("  prediction accuracy after the first step  {:.4f} %\n", 100 * r.prediction_accuracy);
    fmt::print("  next-kernel accuracy                      {:.4f} % (as `run` counts it: {:.4f} %)\n",
               100 * r.next_kernel_accuracy, 100 * r.live_prediction_accuracy);
    fmt::print("  in-time fraction of kernel time           {:.4f} %\n", 100 * r.in_time_fraction);
    fmt::print("  changes {} (dropped {}, merged {}, late {}), relocks {}, lock losses {}\n", r.changes,
               r.dropped_changes, r.merged_changes, r.late_changes, r.relocks, r.losses);
    fmt::print("  GPU progress from {}\n", progress);
  });
}

}  // namespace gearshift::cli
