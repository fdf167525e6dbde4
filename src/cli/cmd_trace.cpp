// `gearshift trace -o FILE [--steps N | --duration S] [--chrome FILE] -- CMD ARGS`: runs an unmodified CUDA
// program with the CUPTI injection library (libgearshift_inject.so) and reports what was traced. Every CUDA process
// of the job writes its own file; launch/trace_files.hpp names them once the job ended (docs/trace-format.md).

#include <cstdlib>
#include <filesystem>
#include <set>
#include <string>
#include <vector>

#include <fmt/core.h>
#include <nlohmann/json.hpp>

#include "cli/commands.hpp"
#include "cupti/config.hpp"
#include "launch/child_process.hpp"
#include "launch/inject_library.hpp"
#include "launch/trace_files.hpp"
#include "report/trace_events.hpp"
#include "trace/error.hpp"
#include "trace/gearshift_format.hpp"
#include "trace/iteration.hpp"

namespace gearshift::cli {
namespace {

namespace fs = std::filesystem;

struct TraceArgs {
  std::string output;
  std::string chrome;
  std::int64_t steps = 0;
  double duration_s = 0;
  int sample_ms = 10;
  std::vector<std::string> command;
};

void report(const std::string& path, const std::string& chrome) {
  trace::Trace t;
  try {
    t = trace::read_gearshift_trace(path);
  } catch (const trace::TraceError& e) {
    fmt::print(stderr, "gearshift: trace not readable: {}\n", e.what());
    return;
  }
  std::set<std::uint32_t> distinct;
  std::size_t memcpys = 0, memsets = 0;
  for (const auto& op : t.ops) {
    if (op.kind == trace::OpKind::kernel) distinct.insert(op.name_id);
    else if (op.kind == trace::OpKind::memcpy) ++memcpys;
    else ++memsets;
  }
  fmt::print("trace {}{}\n", path, t.complete ? "" : " (INCOMPLETE: records were dropped or the run was cut)");
  fmt::print("  kernels seen   {} ({} distinct), {} memcpys, {} memsets\n", t.kernel_count(), distinct.size(),
             memcpys, memsets);
  fmt::print("  NVTX ranges    {}\n", t.markers.size());
  fmt::print("  clock samples  {}\n", t.samples.size());
  try {
    // Step boundaries come from step ranges only (a trace written with all ranges holds library ranges too).
    trace::Trace steps = t;
    std::erase_if(steps.markers, [](const trace::Marker& m) { return !cupti::is_step_marker(m.name); });
    auto a = trace::detect_iterations(steps);
    fmt::print("  steps detected {} ({}; {:.2f} ms/step, {} kernels/step, confidence {:.2f})\n", a.iterations.size(),
               a.method, a.tmpl.period_ns / 1e6, a.tmpl.kernels, a.confidence);
  } catch (const trace::NoIterationError& e) {
    fmt::print("  steps detected 0 ({})\n", e.what());
  }
  if (!chrome.empty()) {
    try {
      // Kernels, ranges and synchronizes, and the clock and power samples as counter tracks (report/).
      report::TimelineContent c;
      c.trace = &t;
      c.counters = report::sample_tracks(t);
      c.other_data = {{"producer", "gearshift trace --chrome"}, {"source", path}, {"format", t.format},
                      {"gpu", t.gpu_name}, {"complete", t.complete}};
      const auto meta = nlohmann::json::parse(t.meta_json, nullptr, false);
      if (!meta.is_discarded()) c.other_data["meta"] = meta;
      report::write_trace_events(c, chrome);
      fmt::print("  Chrome trace   {} (with {} counter tracks of the samples)\n", chrome, c.counters.size());
    } catch (const trace::TraceError& e) {
      fmt::print(stderr, "gearshift: Chrome trace not written: {}\n", e.what());
    }
  }
}

void run_trace(const TraceArgs& args) {
  if (args.command.empty()) throw Exit(kUsage, "no command given: gearshift trace -o FILE -- CMD ARGS");
  std::string lib = launch::find_inject_library();
  auto set = [](const char* k, const std::string& v) { setenv(k, v.c_str(), 1); };
  launch::set_injection_env(lib);
  const std::string out = launch::set_trace_output_env(args.output);  // Chrome JSON: written here from the finished file
  // A device or pipe (`-o /dev/full`) is written into directly; a file name is staged per process.
  std::error_code ec;
  const bool staged = !fs::exists(out, ec) || fs::is_regular_file(out, ec);
  const std::string tag = staged ? launch::run_tag() : std::string();
  if (staged) set(cupti::kEnvTraceTag, tag);
  else unsetenv(cupti::kEnvTraceTag);
  if (args.steps > 0) set(cupti::kEnvSteps, std::to_string(args.steps));
  if (args.duration_s > 0) set(cupti::kEnvDuration, fmt::format("{}", args.duration_s));
  set(cupti::kEnvSampleMs, std::to_string(args.sample_ms));
  launch::ChildExit child = launch::run_child(args.command);
  if (!child.started) throw Exit(child.code, fmt::format("cannot run {}: {}", args.command[0], child.error));
  const int code = child.code;
  const std::vector<launch::ProcessFile> files =
      staged ? launch::name_process_files(out, tag) : std::vector<launch::ProcessFile>{};
  if (fs::exists(out)) {
    report(out, args.chrome);
  } else if (files.empty()) {
    fmt::print(stderr, "gearshift: no trace written to {} (did the program use CUDA? see the warning above)\n", out);
  } else {
    fmt::print(stderr,
               "gearshift: no trace written to {}: no single CUDA process of the job was the busiest of the lowest "
               "rank; each process's file is listed below\n",
               out);
  }
  if (files.size() > 1 || (files.size() == 1 && files[0].path != out)) {
    fmt::print("  files written  {} (one per CUDA process)\n", files.size());
    for (const auto& f : files)
      fmt::print("    {}: pid {}, {}, {}\n", f.path, f.pid, f.rank >= 0 ? fmt::format("rank {}", f.rank) : "no rank",
                 f.error.empty() ? fmt::format("{} kernels", f.kernels) : "NOT READABLE: " + f.error);
  }
  if (code != 0) throw Exit(code, fmt::format("the traced program exited with code {}", code));
}

}  // namespace

void add_trace_command(CLI::App& app) {
  auto* cmd = app.add_subcommand("trace", "Trace the GPU kernels of an unmodified CUDA program (CUPTI injection)");
  auto args = std::make_shared<TraceArgs>();
  cmd->add_option("-o,--output", args->output, "gearshift trace file to write (.jsonl.gz)")->required();
  auto* steps = cmd->add_option("--steps", args->steps,
                                "stop tracing after N step ranges (NVTX \"gearshift.step\" or \"ProfilerStep#\")")
                    ->check(CLI::PositiveNumber);
  cmd->add_option("--duration", args->duration_s, "stop tracing after S seconds")
      ->check(CLI::PositiveNumber)
      ->excludes(steps);
  cmd->add_option("--chrome", args->chrome, "also write Chrome trace JSON (Perfetto) to this file");
  cmd->add_option("--sample-ms", args->sample_ms, "SM/memory clock and power sampling period, ms (0: off)")
      ->check(CLI::Range(0, 60000));
  cmd->add_option("command", args->command, "the program and its arguments, after --")->required();
  cmd->footer("The program's exit code is gearshift's; signals are forwarded to it. Tracing failures never stop "
              "the program: it runs on untraced after one warning line.");
  cmd->callback([args] { run_trace(*args); });
}

}  // namespace gearshift::cli
