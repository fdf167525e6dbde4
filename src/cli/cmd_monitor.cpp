// `gearshift monitor [options] -- CMD ARGS`: runs CMD and measures every selected GPU's energy while it runs.
#include <array>
#include <cstdio>
#include <filesystem>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include <fmt/core.h>
#include <nlohmann/json.hpp>

#include "launch/child_process.hpp"
#include "cli/commands.hpp"
#include "gpu/open_gpus.hpp"
#include "gpu/spec.hpp"
#include "monitor/export.hpp"
#if GEARSHIFT_WITH_PROMETHEUS  // set by CMake; bench/device/build.sh builds without cpp-httplib
#include "monitor/prometheus_server.hpp"
#endif
#include "monitor/sampler.hpp"
#include "report/trace_events.hpp"
#include "trace/error.hpp"

namespace gearshift::cli {

namespace {

struct MonitorArgs {
  int interval_ms = 100;
  std::string csv, jsonl, prometheus, timeline;
  bool json = false;
  std::vector<std::string> command;
};

void note(const std::string& text) { std::fprintf(stderr, "gearshift: monitor: %s\n", text.c_str()); }

std::string quoted(const std::vector<std::string>& argv) {
  std::string s;
  for (const auto& a : argv) s += (s.empty() ? "" : " ") + a;
  return s;
}

int run_monitor(const MonitorArgs& a) {
  if (a.command.empty()) throw Exit(kUsage, "monitor: no command given (gearshift monitor [options] -- CMD ARGS)");
  if (a.interval_ms < 1 || a.interval_ms > 60000) throw Exit(kUsage, "monitor: --interval-ms must be 1..60000");
  if (!a.timeline.empty()) {
    std::error_code ec;
    const auto dir = std::filesystem::absolute(a.timeline).parent_path();
    if (!std::filesystem::is_directory(dir, ec))
      throw Exit(kUsage, fmt::format("monitor: --timeline {}: directory {} does not exist", a.timeline, dir.string()));
  }
  gpu::OpenedGpus gpus = gpu::open_gpus(true);  // gpu::OpenError (exit 5 / 6) before anything starts

  for (std::size_t i = 0; i < gpus.devices.size(); ++i) {
    auto restricted = gpus.devices[i].clocks_api_restricted();
    if (restricted && restricted.value()) {
      note(fmt::format("GPU {}: NVML restricts clock changes to root; monitoring only", gpus.infos[i].index));
    }
  }

  const monitor::Ns t0 = monitor::now_ns();
  std::unique_ptr<monitor::SampleLog> csv, jsonl;
  try {
    if (!a.csv.empty()) csv = std::make_unique<monitor::SampleLog>(a.csv, monitor::SampleLog::Format::kCsv, t0);
    if (!a.jsonl.empty()) jsonl = std::make_unique<monitor::SampleLog>(a.jsonl, monitor::SampleLog::Format::kJsonl, t0);
  } catch (const std::runtime_error& e) {
    throw Exit(kUsage, std::string("monitor: ") + e.what());
  }

  // --timeline: per GPU, its SM clock, memory clock and power as counter tracks (steady clock ns, as the logs).
  std::mutex timeline_mu;
  std::map<unsigned, std::array<report::CounterTrack, 3>> tracks;
  auto keep = [&](const monitor::GpuSample& s) {
    std::lock_guard<std::mutex> g(timeline_mu);
    auto [it, fresh] = tracks.try_emplace(s.gpu);
    if (fresh) {
      const char* names[] = {"SM clock (MHz)", "memory clock (MHz)", "power (W)"};
      for (int i = 0; i < 3; ++i) it->second[i] = {names[i], s.gpu, fmt::format("GPU {}", s.gpu), {}};
    }
    if (s.sm_clock_mhz) it->second[0].points.push_back({s.t, static_cast<double>(*s.sm_clock_mhz)});
    if (s.mem_clock_mhz) it->second[1].points.push_back({s.t, static_cast<double>(*s.mem_clock_mhz)});
    if (s.power_w) it->second[2].points.push_back({s.t, *s.power_w});
  };

  monitor::SamplerOptions opt;
  opt.interval = std::chrono::milliseconds(a.interval_ms);
  // NVML's counter period: the H200's (data/gpus/h200.json), the only one measured so far.
  opt.counter_period =
      std::chrono::nanoseconds(gpu::find_spec("h200").energy_counter_update_ns);
  opt.on_note = note;
  opt.on_sample = [&](const monitor::GpuSample& s) {
    if (csv) csv->write(s);
    if (jsonl) jsonl->write(s);
    if (!a.timeline.empty()) keep(s);
  };
  // The sampler's and the server's threads start with the forwarded signals blocked: run_child takes them.
  std::optional<launch::ForwardedSignalsBlocked> blocked;
  blocked.emplace();
  monitor::Sampler sampler(gpus.devices, opt);

#if GEARSHIFT_WITH_PROMETHEUS
  std::unique_ptr<monitor::PrometheusServer> server;
  if (!a.prometheus.empty()) {
    try {
      server = std::make_unique<monitor::PrometheusServer>(
          a.prometheus, [&] { return monitor::prometheus_text(sampler.latest(), sampler.devices()); });
      note(fmt::format("Prometheus metrics on http://{}:{}/metrics", server->host(), server->port()));
    } catch (const std::exception& e) {
      throw Exit(kUsage, std::string("monitor: ") + e.what());
    }
  }
#else
  if (!a.prometheus.empty()) throw Exit(kUsage, "monitor: this build has no Prometheus endpoint");
#endif

  sampler.begin("command");
  launch::ChildExit child = launch::run_child(a.command);
  blocked.reset();
  monitor::WindowResult w = sampler.end("command");
#if GEARSHIFT_WITH_PROMETHEUS
  server.reset();
#endif

  if (!a.timeline.empty()) {
    report::TimelineContent c;
    {
      std::lock_guard<std::mutex> g(timeline_mu);
      for (auto& [gpu, three] : tracks)
        for (auto& t : three)
          if (!t.points.empty()) c.counters.push_back(t);
    }
    c.other_data = {{"producer", "gearshift monitor --timeline"}, {"command", quoted(a.command)},
                    {"clock", "steady clock ns (CLOCK_MONOTONIC)"}, {"samples", "measured (NVML)"}};
    try {
      report::write_trace_events(c, a.timeline);
      note(fmt::format("timeline written to {}", a.timeline));
    } catch (const trace::TraceError& e) {
      note(fmt::format("timeline not written: {}", e.what()));
    }
  }
  if (!child.started) {
    note(fmt::format("cannot run '{}': {}", a.command.front(), child.error));
  }
  if (a.json) {
    nlohmann::json j;
    j["gpus"] = nlohmann::json::array();
    for (const auto& g : w.gpus) {
      j["gpus"].push_back({{"index", g.gpu},
                           {"energy_j", g.energy_j},
                           {"time_s", monitor::to_s(g.time_ns)},
                           {"avg_power_w", g.avg_power_w},
                           {"peak_power_w", g.peak_power_w},
                           {"approximate", g.approximate},
                           {"method", g.method},
                           {"lost", g.lost}});
    }
    j["exit_code"] = child.code;
    j["begin_monotonic_ns"] = w.begin_ns;
    j["end_monotonic_ns"] = w.end_ns;
    std::fputs((j.dump() + "\n").c_str(), stdout);
  } else {
    std::string text = fmt::format("gearshift: monitor: '{}' exited with {} after {:.3f} s\n", quoted(a.command),
                                   child.code, monitor::to_s(w.time_ns));
    text += fmt::format("  {:>3} {:>12} {:>8} {:>9} {:>9}  {}\n", "GPU", "energy_J", "time_s", "avg_W", "peak_W",
                        "method");
    for (const auto& g : w.gpus) {
      text += fmt::format("  {:>3} {:>12.2f} {:>8.3f} {:>9.1f} {:>9.1f}  {}{}{}\n", g.gpu, g.energy_j,
                          monitor::to_s(g.time_ns), g.avg_power_w, g.peak_power_w, g.method,
                          g.approximate ? " (approximate)" : "", g.lost ? " (GPU lost)" : "");
    }
    std::fputs(text.c_str(), stderr);  // stderr: CMD's stdout stays CMD's
  }
  std::fflush(stdout);
  return child.code;
}

}  // namespace

void add_monitor_command(CLI::App& app) {
  auto* cmd = app.add_subcommand("monitor",
                                 "Run CMD and report each GPU's energy, time, average and peak power while it ran. "
                                 "Exit code: CMD's (127/126 if it cannot be started)");
  auto a = std::make_shared<MonitorArgs>();
  cmd->add_option("--interval-ms", a->interval_ms, "Sampling interval in ms (default 100)");
  cmd->add_option("--csv", a->csv, "Write every sample to this CSV file");
  cmd->add_option("--jsonl", a->jsonl, "Write every sample to this JSON-lines file");
  cmd->add_option("--timeline", a->timeline,
                  "Write the samples' SM clock, memory clock and power as a Perfetto / chrome://tracing timeline "
                  "(Trace Event JSON; .gz: compressed)");
  cmd->add_flag("--json", a->json, "Print the summary as one JSON line on stdout");
  cmd->add_option("--prometheus", a->prometheus, "Serve Prometheus metrics on :PORT or HOST:PORT");
  cmd->add_option("command", a->command, "CMD ARGS (after --)")->required();
  cmd->callback([a] {
    int rc = run_monitor(*a);
    if (rc != 0) throw Exit(rc, "");
  });
}

}  // namespace gearshift::cli
