// `gearshift calibrate --apply -o model.json -- CMD ARGS`: fits the model to the job on this GPU by locking a few
// clock pairs while it runs (service/calibrate.hpp, docs/calibrate.md) and writes the model file that `plan
// --model` and `run --auto --model` use instead of the class priors. Nothing happens without --apply.
#include <filesystem>
#include <memory>

#include <fmt/core.h>
#include <fmt/format.h>

#include "cli/commands.hpp"
#include "gpu/spec.hpp"
#include "launch/inject_library.hpp"
#include "service/calibrate.hpp"

namespace gearshift::cli {

void add_calibrate_command(CLI::App& app) {
  struct Opts : service::CalibrateOptions {
    std::string output;
    bool apply = false;
    double timeout_s = 600;  // --timeout, s
  };
  auto o = std::make_shared<Opts>();
  auto* cmd = app.add_subcommand(
      "calibrate", "Fit the model to the job on this GPU: lock a few clock pairs while it runs (needs --apply)");
  cmd->add_option("-o,--output", o->output, "Model file to write (JSON, docs/calibrate.md)")->required();
  cmd->add_flag("--apply", o->apply,
                "Allow locking the GPU's clocks (root or CAP_SYS_ADMIN); required: calibrate does nothing without it");
  cmd->add_option("--gpu", o->gpu, "NVML index of the GPU the job uses (default 0)");
  cmd->add_option("--gpu-spec", o->gpu_spec,
                  fmt::format("GPU spec ({}; default: from NVML's name)", fmt::join(gpu::spec_names(), ", ")));
  cmd->add_option("--pairs", o->pairs, "Clock pairs to measure, the default pair included (default 4)")
      ->check(CLI::Range(3, 20));
  cmd->add_option("--min-sm-clock", o->min_sm_mhz,
                  "Lowest SM clock to lock, MHz (default: half the default SM clock)");
  cmd->add_option("--warmup-steps", o->sweep.warmup_steps, "Steps detected at the default pair first (default 10)")
      ->check(CLI::Range(2, 100000));
  cmd->add_option("--settle-steps", o->sweep.settle_steps, "Steps skipped after each lock (default 2)")
      ->check(CLI::Range(1, 1000));
  cmd->add_option("--steps-per-pair", o->sweep.steps_per_pair, "Steps measured at each pair (default 10)")
      ->check(CLI::Range(2, 100000));
  cmd->add_option("--timeout", o->timeout_s, "Give up after this many seconds, s (default 600)")
      ->check(CLI::PositiveNumber);
  cmd->add_option("cmd", o->cmd, "-- CMD ARGS")->required();
  cmd->callback([o] {
    if (!o->apply)
      throw Exit(kUsage,
                 "calibrate locks this GPU's clocks at several pairs while the job runs; pass --apply to allow it "
                 "(root or CAP_SYS_ADMIN). Never on a GPU whose clocks you may not change (a lent or shared GPU): "
                 "plan with the class priors there");
    const auto dir = std::filesystem::absolute(o->output).parent_path();
    std::error_code ec;
    if (!std::filesystem::is_directory(dir, ec))
      throw Exit(kUsage, fmt::format("-o {}: directory {} does not exist", o->output, dir.string()));
    o->watchdog_exe = launch::self_exe();
    o->sweep.timeout_ns = seconds_to_ns(o->timeout_s);
    o->progress_sink = [](std::string_view line) { fmt::print(stderr, "{}\n", line); };  // the run's lines
    const service::CalibrationRun r = service::run_calibration(*o);
    if (!r.child.started) throw Exit(r.child.code, o->cmd[0] + ": " + r.child.error);
    if (!r.sweep.error.empty())
      throw Exit(kFailure, fmt::format("no model: {}. Give a job of at least {} steps ({} warm-up, then {} pairs x ({} "
                                       "settle + {} measured, and at least {:g} s)); the clocks are back at their defaults",
                                       r.sweep.error, r.steps_needed, o->sweep.warmup_steps, r.pairs.size(),
                                       o->sweep.settle_steps, o->sweep.steps_per_pair,
                                       static_cast<double>(o->sweep.min_window_ns) * 1e-9));
    if (r.child.code != 0)
      throw Exit(r.child.code, fmt::format("{} exited with status {}; no model written", o->cmd[0], r.child.code));
    const sim::CalibratedModel cm = service::fit_calibration(*o, r);
    try {
      sim::write_model_file(cm, o->output);
    } catch (const std::runtime_error& e) {
      throw Exit(kFailure, e.what());
    }
    if (cm.switch_latency)
      fmt::print(stderr,
                 "gearshift calibrate: switch latency MEASURED (lock call to the sampled SM clock at the new clock): "
                 "lowering median {:.1f} ms over {}, raising median {:.1f} ms over {}{}; plans made with this model "
                 "take L = {:.1f} ms\n",
                 cm.switch_latency->median_down_ms(), cm.switch_latency->down_ms.size(),
                 cm.switch_latency->median_up_ms(), cm.switch_latency->up_ms.size(),
                 r.sweep.switches_unreached ? fmt::format(" ({} lock(s) not shown within 1 s, left out)",
                                                          r.sweep.switches_unreached)
                                            : std::string(),
                 cm.switch_latency->plan_latency_ms());
    else
      fmt::print(stderr, "gearshift calibrate: switch latency not measured (no lock changed the sampled SM clock)\n");
    fmt::print(stderr, "gearshift calibrate: model written to {} (use: gearshift plan TRACE --model {})\n", o->output,
               o->output);
  });
}

}  // namespace gearshift::cli
