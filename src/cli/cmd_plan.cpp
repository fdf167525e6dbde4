#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <memory>
#include <optional>
#include <unistd.h>

#include <fmt/core.h>
#include <fmt/format.h>
#include <fmt/ranges.h>

#include "cli/commands.hpp"
#include "cli/plan_print.hpp"
#include "service/plan_job.hpp"
#include "cli/report_option.hpp"
#include "gpu/spec.hpp"
#include "plan/plan_file.hpp"

namespace gearshift::embedded {
extern const unsigned char demo_trace[];
extern const std::size_t demo_trace_size;
}  // namespace gearshift::embedded

namespace gearshift::cli {

using namespace gearshift::service;  // the jobs this face calls
namespace {

struct PlanArgs {
  std::string trace;
  std::string gpu;  // empty: the trace's GPU
  std::string max_slowdown = "0.5%";
  std::string output;
  std::string report;  // --report: the HTML plan report (report/plan_report.hpp)
  std::string strategy = "phase";
  std::optional<double> switch_latency_ms;  // absent: the GPU spec's estimate
  bool json = false;
  bool no_calibrate = false;
  std::optional<int> device;  // none: the one with most kernels
  bool trust_period = false;
  bool kernels_only = false;
  std::string model;  // --model: a `gearshift calibrate` model file
};

void add_common(CLI::App* cmd, PlanArgs& a) {
  cmd->add_option("--gpu", a.gpu,
                  fmt::format("GPU spec the trace ran on ({}; default: the GPU the trace names, else h200)",
                              fmt::join(gpu::spec_names(), ", ")));
  cmd->add_option("--max-slowdown", a.max_slowdown, "Allowed step-time increase, e.g. 0.5% or 0.005")->capture_default_str();
  cmd->add_option("-o,--output", a.output, "Write the chosen plan (plan.json)");
  cmd->add_option("--report", a.report, "Write an HTML report of the plan (self-contained; docs/report.md)");
  cmd->add_option("--strategy", a.strategy, "Plan written to --output: iteration, pass, kernel-local, kernel-global, phase")
      ->capture_default_str();
  cmd->add_option("--switch-latency-ms", a.switch_latency_ms,
                  "Switch latency L of the phase plan written to --output (default: the GPU spec's estimate)");
  cmd->add_flag("--json", a.json, "Print one JSON object instead of the table");
  cmd->add_flag("--no-calibrate", a.no_calibrate, "Do not scale the model to the trace's measured power");
  cmd->add_option("--model", a.model,
                  "Model file from `gearshift calibrate`: its fitted kernels and board power instead of the class "
                  "priors and the calibration to the trace's power (docs/calibrate.md)");
  cmd->add_option("--device", a.device, "CUDA device of the trace to plan (default: the one with most kernels)")
      ->check(CLI::NonNegativeNumber);
  cmd->add_flag("--kernels-only", a.kernels_only,
                "Plan from the trace's kernels alone, leaving its copies and memsets out, as `run --auto` sees a "
                "job whose CUPTI refuses copy activity (its launch feed then carries kernels only)");
  cmd->add_flag("--trust-period", a.trust_period,
                "Accept a kernel-stream period without step markers or an optimizer update as the training step "
                "(docs/step-detection.md)");
}

// -o names a file that can be written: its directory exists and is writable, and it is not a directory. Exit(kBadInput)
// otherwise, before the trace is planned.
void check_output(const std::string& output) {
  namespace fs = std::filesystem;
  std::error_code ec;
  if (fs::is_directory(output, ec))
    throw Exit(kBadInput, fmt::format("-o {}: is a directory; name the plan file, e.g. {}/plan.json", output,
                                      output));
  const fs::path p(output);
  const fs::path dir = p.has_parent_path() ? p.parent_path() : fs::path(".");
  if (!fs::is_directory(dir, ec))
    throw Exit(kBadInput, fmt::format("-o {}: cannot write the plan: directory {} does not exist", output,
                                      dir.string()));
  if (::access(dir.c_str(), W_OK) != 0 && !(fs::exists(p, ec) && ::access(p.c_str(), W_OK) == 0))
    throw Exit(kBadInput, fmt::format("-o {}: cannot write the plan: directory {} is not writable", output,
                                      dir.string()));
}

void execute(const PlanArgs& a, const std::string& path, const std::string& display) {
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec))  // the per-rank files of a launcher's run are planned together
    throw Exit(kBadInput, fmt::format("{}: is a directory, not a trace file; the per-rank traces of one `gearshift "
                                      "trace -o FILE` run (FILE, FILE.rank1, ...) are planned by `gearshift "
                                      "plan-ranks {}`, each rank against the straggler",
                                      display, display));
  PlanJobOptions o;
  o.trace_path = path;
  o.display_name = display;
  if (!a.gpu.empty()) o.gpu = a.gpu;
  o.max_slowdown = parse_slowdown(a.max_slowdown);
  if (const std::string echo = slowdown_echo(a.max_slowdown); !echo.empty())
    fmt::print(stderr, "gearshift plan: note: {}\n", echo);
  const std::optional<plan::Strategy> strategy = plan::parse_strategy(a.strategy);
  if (!strategy)
    throw Exit(kUsage, fmt::format("unknown --strategy '{}' (iteration, pass, kernel-local, kernel-global, phase)",
                                   a.strategy));
  o.strategy = *strategy;
  if (a.switch_latency_ms) {
    if (!(*a.switch_latency_ms >= 0) || !std::isfinite(*a.switch_latency_ms))
      throw Exit(kUsage, fmt::format("--switch-latency-ms {}: the switch latency must be a number of ms >= 0",
                                     *a.switch_latency_ms));
    o.switch_latency_ns = *a.switch_latency_ms * 1e6;
  }
  if (!a.output.empty()) check_output(a.output);  // before planning, not after it
  if (!a.report.empty()) check_report_path(a.report);
  o.calibrate = !a.no_calibrate;
  if (!a.model.empty()) {
    o.model = load_model_checked(a.model);
    o.model_path = a.model;
  }
  o.steps.device = a.device;
  o.steps.trust_period = a.trust_period;
  o.kernels_only = a.kernels_only;
  PlanJobResult r = run_plan_job(o);
  if (a.json) fmt::print("{}\n", report_json(o, r).dump(2));
  else print_report(o, r);
  if (!a.output.empty()) {
    try {
      plan::write_plan_file(plan_file(o, r), a.output);
    } catch (const plan::PlanFileError& e) {
      throw Exit(kBadInput, e.what());
    }
    if (!a.json)
      fmt::print("Plan written  {} (strategy {}, {} phases)\n", a.output, plan::to_string(r.chosen->schedule.strategy),
                 plan::phases_of(r.chosen->schedule).size());
  }
  if (!a.report.empty()) {
    write_report(o, r, a.report);
    if (!a.json) fmt::print("Report written {}\n", a.report);
  }
}

// The embedded demo trace as a temporary file (importers read files); removed when done.
struct EmbeddedTrace {
  std::string path;
  EmbeddedTrace() {
    path = (std::filesystem::temp_directory_path() / fmt::format("gearshift-demo-{}.json.gz", ::getpid())).string();
    std::ofstream f(path, std::ios::binary);
    f.write(reinterpret_cast<const char*>(embedded::demo_trace), static_cast<std::streamsize>(embedded::demo_trace_size));
    if (!f) throw Exit(kFailure, "cannot write the embedded demo trace to " + path + " (is $TMPDIR writable?)");
  }
  ~EmbeddedTrace() { std::remove(path.c_str()); }
};

}  // namespace

void add_plan_command(CLI::App& app) {
  auto args = std::make_shared<PlanArgs>();
  auto* cmd = app.add_subcommand("plan", "Plan GPU clocks for a training trace and predict time and energy (modelled)");
  cmd->add_option("trace", args->trace, "torch.profiler Chrome trace (.json/.json.gz) or gearshift trace")->required();
  add_common(cmd, *args);
  cmd->callback([args] { execute(*args, args->trace, args->trace); });
}

void add_demo_command(CLI::App& app) {
  auto args = std::make_shared<PlanArgs>();
  auto* cmd = app.add_subcommand("demo", "`gearshift plan` on the embedded GPT-3 XL H200 trace (no GPU needed)");
  add_common(cmd, *args);
  cmd->callback([args] {
    EmbeddedTrace t;
    execute(*args, t.path, "embedded:gpt3xl_h200_trace.json.gz");
  });
}

}  // namespace gearshift::cli
