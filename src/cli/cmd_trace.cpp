// `gearshift trace -o FILE [--steps N | --duration S] [--chrome FILE] -- CMD ARGS`: runs an unmodified CUDA
// program with the CUPTI injection library (libgearshift_inject.so) and reports what was traced.
//
// Every CUDA process of the job (ranks, compile workers, subprocesses) writes its own file under a name private to
// this run (cupti::staging_trace_path: FILE with ".gs-<tag>.pid<pid>" before its extension; a killed run leaves
// those, each a readable trace). Once the job ended they are renamed: FILE to the training process (the busiest
// process of the lowest rank, or of all when none has a rank, when exactly one is busiest), FILE.rank<r> to the
// busiest process of each other rank, FILE.pid<pid> to the rest (docs/trace-format.md).

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include <fmt/core.h>
#include <nlohmann/json.hpp>

#include "cli/child_process.hpp"
#include "cli/commands.hpp"
#include "cli/inject_library.hpp"
#include "cupti/config.hpp"
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

// One process's file of this run.
struct ProcessFile {
  std::string staged, path;  // as the process wrote it; its final name
  long pid = -1;
  int rank = -1;
  std::size_t kernels = 0;
  std::string error;  // not readable: kept under its staged name
};

// A tag of 8 letters and digits, private enough to this run: no other run's files match it.
std::string run_tag() {
  static const char digits[] = "abcdefghijklmnopqrstuvwxyz0123456789";
  std::uint64_t x = static_cast<std::uint64_t>(getpid()) * 0x9e3779b97f4a7c15ull ^
                    static_cast<std::uint64_t>(std::chrono::steady_clock::now().time_since_epoch().count());
  std::string t;
  for (int i = 0; i < 8; ++i, x /= 36) t += digits[x % 36];
  return t;
}

// The files this run's processes wrote (tag `tag`), read for their rank and kernel count, and their final names.
std::vector<ProcessFile> name_process_files(const std::string& out, const std::string& tag) {
  std::vector<ProcessFile> files;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(fs::path(out).parent_path(), ec)) {
    const long pid = cupti::staging_trace_pid(out, tag, e.path().string());
    if (pid <= 0) continue;
    ProcessFile f;
    f.staged = f.path = e.path().string();
    f.pid = pid;
    try {
      const trace::Trace t = trace::read_gearshift_trace(f.staged);
      f.kernels = t.kernel_count();
      const auto meta = nlohmann::json::parse(t.meta_json, nullptr, false);
      if (meta.is_object() && meta.contains("rank") && meta["rank"].is_number_integer()) f.rank = meta["rank"].get<int>();
    } catch (const trace::TraceError& x) {
      f.error = x.what();
    }
    files.push_back(std::move(f));
  }
  std::sort(files.begin(), files.end(), [](const ProcessFile& a, const ProcessFile& b) { return a.pid < b.pid; });
  // The busiest readable process of each rank (-1: no rank), when exactly one is busiest.
  std::map<int, std::optional<std::size_t>> main_of;
  for (std::size_t i = 0; i < files.size(); ++i) {
    if (!files[i].error.empty()) continue;
    auto& m = main_of[files[i].rank];
    if (!m || files[i].kernels > files[*m].kernels) m = i;
  }
  for (auto& [rank, m] : main_of)
    for (std::size_t i = 0; m && i < files.size(); ++i)
      if (i != *m && files[i].error.empty() && files[i].rank == rank && files[i].kernels == files[*m].kernels)
        m.reset();  // a tie: neither is the rank's training process
  // FILE: the main process of the lowest rank (ranked processes first).
  std::optional<std::size_t> primary;
  if (!main_of.empty()) {
    auto it = main_of.upper_bound(-1);
    primary = it != main_of.end() ? it->second : main_of.begin()->second;
  }
  std::set<std::string> taken;
  for (std::size_t i = 0; i < files.size(); ++i) {
    ProcessFile& f = files[i];
    if (!f.error.empty()) continue;
    if (primary && i == *primary) f.path = out;
    else if (f.rank >= 0 && main_of[f.rank] == i) f.path = cupti::insert_before_extension(out, fmt::format("rank{}", f.rank));
    else f.path = cupti::insert_before_extension(out, fmt::format("pid{}", f.pid));
    if (!taken.insert(f.path).second) f.path = cupti::insert_before_extension(out, fmt::format("pid{}", f.pid));
    std::error_code rc;
    fs::rename(f.staged, f.path, rc);
    if (rc) {
      f.error = "not renamed: " + rc.message();
      f.path = f.staged;
    }
  }
  return files;
}

void run_trace(const TraceArgs& args) {
  if (args.command.empty()) throw Exit(kUsage, "no command given: gearshift trace -o FILE -- CMD ARGS");
  std::string lib = find_inject_library();
  auto set = [](const char* k, const std::string& v) { setenv(k, v.c_str(), 1); };
  set_injection_env(lib);
  const std::string out = set_trace_output_env(args.output);  // Chrome JSON: written here from the finished file
  // A device or pipe (`-o /dev/full`) is written into directly; a file name is staged per process.
  std::error_code ec;
  const bool staged = !fs::exists(out, ec) || fs::is_regular_file(out, ec);
  const std::string tag = staged ? run_tag() : std::string();
  if (staged) set(cupti::kEnvTraceTag, tag);
  else unsetenv(cupti::kEnvTraceTag);
  if (args.steps > 0) set(cupti::kEnvSteps, std::to_string(args.steps));
  if (args.duration_s > 0) set(cupti::kEnvDuration, fmt::format("{}", args.duration_s));
  set(cupti::kEnvSampleMs, std::to_string(args.sample_ms));
  ChildExit child = run_child(args.command);
  if (!child.started) throw Exit(child.code, fmt::format("cannot run {}: {}", args.command[0], child.error));
  const int code = child.code;
  const std::vector<ProcessFile> files = staged ? name_process_files(out, tag) : std::vector<ProcessFile>{};
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
