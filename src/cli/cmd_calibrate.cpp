// `gearshift calibrate --apply -o model.json -- CMD ARGS`: runs the job as `gearshift run` does (the injected
// tracer streams every kernel's activity through the launch feed), locks the GPU at a few chosen (SM, memory)
// clock pairs one after the other, measures each kernel's mean duration and the GPU's average power
// (NVML's energy counter) at each, fits per kernel name its a, b (model/calibration_sweep.hpp) and the board's
// power (sim/calibration_model.hpp), and writes the model file that `plan --model` and `run --auto --model`
// use instead of the class priors. docs/calibrate.md.
//
// Safety: nothing happens without --apply (the clocks are locked on purpose, the whole point); the GPU's lock
// and the watchdog of `run --apply` guard the clocks (reset when this process dies); the first lock is tried
// before the job starts, so that a refused one (no root / CAP_SYS_ADMIN) ends with the clocks untouched; every
// lock is reset when the sweep ends, fails, or the job ends first.
#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdlib>
#include <ctime>
#include <filesystem>
#include <map>
#include <mutex>
#include <optional>
#include <thread>
#include <unordered_map>

#include <fmt/core.h>
#include <fmt/format.h>

#include "cli/child_process.hpp"
#include "cli/commands.hpp"
#include "cli/feed_server.hpp"
#include "cli/inject_library.hpp"
#include "cli/open_gpus.hpp"
#include "cupti/config.hpp"
#include "gpu/spec.hpp"
#include "model/calibration_sweep.hpp"
#include "model/workload.hpp"
#include "runtime/feed_collector.hpp"
#include "runtime/live.hpp"
#include "runtime/safety.hpp"
#include "sim/calibration_model.hpp"
#include "trace/graph_units.hpp"
#include "trace/iteration.hpp"

namespace gearshift::cli {

namespace {

using Clock = std::chrono::steady_clock;

// Resets the clocks this command locked, once (the sweep's end, an error, the job ending first).
class ClockGuard {
 public:
  ClockGuard(gpu::Device dev, bool memory) : dev_(dev), memory_(memory) {}
  ~ClockGuard() { reset(); }
  void touched() { touched_ = true; }
  void reset() {
    if (!touched_) return;
    touched_ = false;
    if (auto r = dev_.reset_locked_sm_clocks(); !r)
      fmt::print(stderr, "gearshift calibrate: could not reset the SM clocks: {}\n", r.error().what());
    if (memory_)
      if (auto r = dev_.reset_locked_mem_clocks(); !r)
        fmt::print(stderr, "gearshift calibrate: could not reset the memory clocks: {}\n", r.error().what());
  }

 private:
  gpu::Device dev_;
  bool memory_;
  bool touched_ = false;
};

struct Done {
  std::string name;
  std::int64_t start_ns, end_ns;  // CLOCK_MONOTONIC
};

// What the feed reader shares with the sweep thread.
struct Shared {
  std::mutex mu;
  runtime::FeedCollector warmup{2'000'000};   // the followed process's kernels, for step detection
  std::unordered_map<std::int64_t, std::string> pending;  // correlation -> name of a launch not completed
  std::vector<Done> done;                                  // completed kernels, arrival order
  std::atomic<bool> job_ended{false};
  std::atomic<bool> sweep_over{false};  // the job runs on past the sweep: nothing more is kept
};

struct SweepResult {
  trace::Trace trace;                // the warm-up at the reference pair (what the workload is built from)
  trace::IterationAnalysis steps;
  std::vector<sim::PairMeasurement> pairs;
  std::vector<std::map<std::string, std::pair<double, std::size_t>>> durations;  // per pair: name -> (sum s, n)
  std::string error;                 // empty: complete
};

struct SweepOptions {
  std::size_t warmup_steps = 10, settle_steps = 2, steps_per_pair = 10;
  double timeout_s = 600;
};

// Polls the energy counter every ms until it changes (the start of a tick): its value, mJ, and when, monotonic ns.
bool next_tick(const gpu::Device& dev, std::uint64_t& mj, std::int64_t& at_ns, const std::function<bool()>& stop,
               std::string& error) {
  auto first = dev.total_energy_mj();
  if (!first) return error = first.error().what(), false;
  for (;;) {
    if (stop()) return error = "the job ended", false;
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
    auto now = dev.total_energy_mj();
    if (!now) return error = now.error().what(), false;
    if (now.value() != first.value()) {
      mj = now.value();
      at_ns = runtime::monotonic_ns();
      return true;
    }
  }
}

// Kernels completed that started at or after `from_ns` (monotonic), counted from index `from_index` on.
std::size_t started_since(Shared& sh, std::int64_t from_ns) {
  std::lock_guard<std::mutex> g(sh.mu);
  return static_cast<std::size_t>(std::count_if(sh.done.begin(), sh.done.end(),
                                                [&](const Done& d) { return d.start_ns >= from_ns; }));
}

// The sweep, on its own thread: warm-up at the reference pair (locked before the job started) until steps are
// detected, then each pair: lock, settle, measure a window of whole counter ticks.
SweepResult sweep(Shared& sh, const gpu::Device& dev, bool lock_memory, ClockGuard& guard,
                  const std::vector<model::ClockPair>& pairs, const SweepOptions& o) {
  SweepResult r;
  const auto t0 = Clock::now();
  auto elapsed = [&] { return std::chrono::duration<double>(Clock::now() - t0).count(); };
  auto stop = [&] { return sh.job_ended.load() || elapsed() > o.timeout_s; };
  auto wait_for = [&](std::int64_t from_ns, std::size_t kernels) {
    while (started_since(sh, from_ns) < kernels) {
      if (stop()) return false;
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    return true;
  };
  // Warm-up: the template and its kernels per step.
  for (;;) {
    if (stop()) {
      r.error = sh.job_ended ? "the job ended before " + std::to_string(o.warmup_steps) + " steps were detected"
                             : "no steps detected within --timeout";
      return r;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
    trace::Trace t;
    {
      std::lock_guard<std::mutex> g(sh.mu);
      t = sh.warmup.snapshot();
    }
    runtime::FeedCollector::sort_by_start(t);
    if (t.ops.empty()) continue;
    try {
      trace::IterationAnalysis an = trace::detect_iterations(t);
      if (an.iterations.size() >= o.warmup_steps) {
        r.trace = std::move(t);
        r.steps = std::move(an);
        break;
      }
    } catch (const trace::NoIterationError&) {
    }
  }
  const std::size_t per_step = std::max<std::size_t>(1, r.steps.tmpl.kernels);
  for (std::size_t i = 0; i < pairs.size(); ++i) {
    const auto& p = pairs[i];
    auto s = dev.set_locked_sm_clocks(static_cast<unsigned>(p.sm_mhz), static_cast<unsigned>(p.sm_mhz));
    if (s && lock_memory) s = dev.set_locked_mem_clocks(static_cast<unsigned>(p.mem_mhz), static_cast<unsigned>(p.mem_mhz));
    guard.touched();
    if (!s) {
      r.error = fmt::format("locking SM {} / memory {} MHz failed: {}", p.sm_mhz, p.mem_mhz, s.error().what());
      return r;
    }
    if (!wait_for(runtime::monotonic_ns(), o.settle_steps * per_step)) break;
    std::uint64_t e0 = 0, e1 = 0;
    std::int64_t a = 0, b = 0;
    std::string why;
    if (!next_tick(dev, e0, a, stop, why)) {
      r.error = "energy counter: " + why;
      break;
    }
    const double clock_a = dev.sm_clock_mhz().value_or(static_cast<unsigned>(p.sm_mhz));
    if (!wait_for(a, o.steps_per_pair * per_step) || !next_tick(dev, e1, b, stop, why)) {
      if (r.error.empty()) r.error = why.empty() ? "" : "energy counter: " + why;
      break;
    }
    const double clock_b = dev.sm_clock_mhz().value_or(static_cast<unsigned>(p.sm_mhz));
    sim::PairMeasurement m;
    m.locked = p;
    m.sampled_sm_mhz = 0.5 * (clock_a + clock_b);
    m.window_s = static_cast<double>(b - a) * 1e-9;
    m.average_power_w = static_cast<double>(e1 - e0) * 1e-3 / m.window_s;
    std::map<std::string, std::pair<double, std::size_t>> by_name;
    {
      std::lock_guard<std::mutex> g(sh.mu);
      for (const auto& d : sh.done)
        if (d.start_ns >= a && d.end_ns <= b) {
          auto& e = by_name[d.name];
          e.first += static_cast<double>(d.end_ns - d.start_ns) * 1e-9;
          ++e.second;
          ++m.kernels;
        }
    }
    m.steps = static_cast<double>(m.kernels) / static_cast<double>(per_step);
    r.pairs.push_back(m);
    r.durations.push_back(std::move(by_name));
    fmt::print(stderr, "gearshift calibrate: pair {}/{}: SM {} MHz, memory {} MHz: {:.1f} steps in {:.2f} s, {:.1f} W\n",
               i + 1, pairs.size(), p.sm_mhz, p.mem_mhz, m.steps, m.window_s, m.average_power_w);
  }
  guard.reset();
  if (r.error.empty() && r.pairs.size() < pairs.size())
    r.error = sh.job_ended ? fmt::format("the job ended after {} of the {} clock pairs", r.pairs.size(), pairs.size())
                           : "the sweep ran past --timeout";
  return r;
}

std::string utc_now() {
  const std::time_t t = std::time(nullptr);
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

}  // namespace

void add_calibrate_command(CLI::App& app) {
  struct Opts {
    std::string output, gpu_spec;
    bool apply = false;
    unsigned gpu = 0;
    int pairs = 4, min_sm_mhz = 0;
    SweepOptions sweep;
    std::vector<std::string> cmd;
  };
  auto o = std::make_shared<Opts>();
  auto* cmd = app.add_subcommand(
      "calibrate", "Fit the model to the job on this GPU: lock a few clock pairs while it runs (needs --apply)");
  cmd->add_option("-o,--output", o->output, "Model file to write (JSON, docs/calibrate.md)")->required();
  cmd->add_flag("--apply",
                o->apply,
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
  cmd->add_option("--timeout", o->sweep.timeout_s, "Give up after this many seconds, s (default 600)")
      ->check(CLI::PositiveNumber);
  cmd->add_option("cmd", o->cmd, "-- CMD ARGS")->required();
  cmd->callback([o] {
    if (!o->apply)
      throw Exit(kUsage,
                 "calibrate locks this GPU's clocks at several pairs while the job runs; pass --apply to allow it "
                 "(root or CAP_SYS_ADMIN). Never on a GPU whose clocks you may not change (a lent or shared GPU): "
                 "plan with the class priors there");
    {
      const auto dir = std::filesystem::absolute(o->output).parent_path();
      std::error_code ec;
      if (!std::filesystem::is_directory(dir, ec))
        throw Exit(kUsage, fmt::format("-o {}: directory {} does not exist", o->output, dir.string()));
    }
    OpenedGpus gpus = open_gpus(false);
    if (o->gpu >= gpus.devices.size())
      throw Exit(kUsage, fmt::format("--gpu {}: only {} GPU(s)", o->gpu, gpus.devices.size()));
    const gpu::Device dev = gpus.devices[o->gpu];
    const std::string device_name = gpus.infos[o->gpu].name;
    std::string spec_name = o->gpu_spec;
    if (spec_name.empty()) spec_name = gpu::spec_name_for_device(device_name);
    if (spec_name.empty())
      throw Exit(kUsage, fmt::format("GPU {} ('{}') has no spec; pass --gpu-spec (known: {}) if it is one of those",
                                     o->gpu, device_name, fmt::join(gpu::spec_names(), ", ")));
    gpu::GpuSpec spec;
    try {
      spec = gpu::find_spec(spec_name);
    } catch (const std::invalid_argument& e) {
      throw Exit(kUsage, std::string("--gpu-spec: ") + e.what());
    }
    if (auto e = dev.total_energy_mj(); !e)
      throw Exit(kNoGpu, fmt::format("GPU {}: no energy counter ({}): calibrate measures power with it (Volta or newer)",
                                     o->gpu, e.error().what()));
    const model::ClockPair ref{spec.default_sm_clock_mhz, spec.default_mem_clock_mhz};
    std::unique_ptr<runtime::GpuLock> lock;
    std::unique_ptr<runtime::Watchdog> watchdog;
    try {
      lock = std::make_unique<runtime::GpuLock>(gpus.infos[o->gpu].uuid);
      watchdog = std::make_unique<runtime::Watchdog>(self_exe(), gpus.infos[o->gpu].uuid, *lock, true);
    } catch (const runtime::GpuBusyError& e) {
      throw Exit(kNoPermission, e.what());
    } catch (const std::runtime_error& e) {
      throw Exit(kFailure, e.what());
    }
    // The first lock, before the job starts: a refusal leaves the clocks as they were.
    auto denied = [&](const gpu::NvmlError& e) {
      return Exit(kNoPermission,
                  fmt::format("GPU {}: NVML refused to lock the clocks ({}): calibrate needs root or CAP_SYS_ADMIN "
                              "(and no API restriction, `gearshift gpus`); the clocks were not changed and the job "
                              "was not started",
                              o->gpu, e.what()));
    };
    ClockGuard guard(dev, true);
    if (auto s = dev.set_locked_sm_clocks(static_cast<unsigned>(ref.sm_mhz), static_cast<unsigned>(ref.sm_mhz)); !s) {
      if (s.error().code == gpu::NvmlErrc::kNoPermission) throw denied(s.error());
      throw Exit(kFailure, fmt::format("GPU {}: locking the SM clock failed: {}", o->gpu, s.error().what()));
    }
    guard.touched();
    bool lock_memory = true;
    if (auto s = dev.set_locked_mem_clocks(static_cast<unsigned>(ref.mem_mhz), static_cast<unsigned>(ref.mem_mhz)); !s) {
      if (s.error().code == gpu::NvmlErrc::kNoPermission) {
        guard.reset();
        throw denied(s.error());
      }
      lock_memory = false;  // e.g. not supported: the pairs keep the default memory clock
      fmt::print(stderr, "gearshift calibrate: memory clocks cannot be locked ({}); measuring SM clocks only\n",
                 s.error().what());
    }
    gpu::GpuSpec pair_spec = spec;
    if (!lock_memory) pair_spec.mem_clocks_mhz = {spec.default_mem_clock_mhz};
    const int min_sm = o->min_sm_mhz > 0 ? o->min_sm_mhz : spec.default_sm_clock_mhz / 2;
    std::vector<model::ClockPair> pairs;
    try {
      pairs = model::calibration_pairs(pair_spec, min_sm, o->pairs);
    } catch (const std::invalid_argument& e) {
      throw Exit(kUsage, e.what());
    }
    std::string pair_list;
    for (const auto& p : pairs) pair_list += fmt::format("{}{}/{}", pair_list.empty() ? "" : ", ", p.sm_mhz, p.mem_mhz);
    fmt::print(stderr, "gearshift calibrate: {} on GPU {} ({}): pairs (SM/memory MHz) {}\n", spec.full_name, o->gpu,
               device_name, pair_list);

    Shared sh;
    const unsigned run_gpu = o->gpu;
    FeedServer* server_ptr = nullptr;
    FeedServer server(gpu_resolver(gpus.infos), [&](const FeedProcess& p, const feed::FeedEvent& e) {
      std::int64_t f = server_ptr->followed();
      if (f < 0 && e.kind == feed::FeedEvent::Kind::launch && p.gpu && *p.gpu == run_gpu) {
        server_ptr->follow(p.index, "");
        f = server_ptr->followed();
      }
      if (f != static_cast<std::int64_t>(p.index) || sh.sweep_over) return;
      std::lock_guard<std::mutex> g(sh.mu);
      sh.warmup.add(e);
      if (e.kind == feed::FeedEvent::Kind::launch) {
        sh.pending[e.correlation] = std::string(e.name);
      } else if (e.kind == feed::FeedEvent::Kind::complete) {
        auto it = sh.pending.find(e.correlation);
        if (it == sh.pending.end()) return;
        sh.done.push_back({std::move(it->second), e.gpu_start_ns, e.gpu_end_ns});
        sh.pending.erase(it);
      }
    });
    server_ptr = &server;
    // Before any thread starts (setenv is not thread-safe): the feed, every kernel's activity, no markers.
    setenv(feed::kEnvSocket, server.socket_path().c_str(), 1);
    try {
      set_injection_env(find_inject_library());
    } catch (const Exit& e) {
      fmt::print(stderr, "gearshift calibrate: warning: {}; the job is not traced unless it has its own hook\n",
                 e.what());
    }
    unsetenv(cupti::kEnvOutput);
    unsetenv(cupti::kEnvFeedActivityPeriodMs);
    setenv(cupti::kEnvFeedMarkerUs, "0", 1);

    std::optional<ForwardedSignalsBlocked> blocked;
    blocked.emplace();
    server.start();
    SweepResult result;
    std::thread sweeper([&] {
      result = sweep(sh, dev, lock_memory, guard, pairs, o->sweep);
      sh.sweep_over = true;
    });
    ChildExit ce = run_child(o->cmd);
    blocked.reset();
    sh.job_ended = true;
    sweeper.join();
    server.stop();
    guard.reset();
    watchdog->release();
    if (!ce.started) throw Exit(ce.code, o->cmd[0] + ": " + ce.error);
    if (!result.error.empty())
      throw Exit(kFailure,
                 fmt::format("no model: {}. Give a job of at least {} steps ({} warm-up, then {} pairs x ({} settle + "
                             "{} measured)); the clocks are back at their defaults",
                             result.error,
                             o->sweep.warmup_steps + pairs.size() * (o->sweep.settle_steps + o->sweep.steps_per_pair + 2),
                             o->sweep.warmup_steps, pairs.size(), o->sweep.settle_steps, o->sweep.steps_per_pair));
    if (ce.code != 0) throw Exit(ce.code, fmt::format("{} exited with status {}; no model written", o->cmd[0], ce.code));

    // The fits: each kernel's time at the pairs, then the board's power on the workload with those times.
    sim::CalibratedModel cm;
    cm.gpu = spec.name;
    cm.ref = ref;
    cm.pairs = result.pairs;
    cm.created_utc = utc_now();
    cm.pair_choice = fmt::format(
        "{} pairs (SM/memory MHz: {}): the default pair, then greedily the pair with the most information per "
        "minute (gain in log det of the [1, f0/f, m0/m] design over the pair's expected duration), SM >= {} MHz; "
        "{} settle + {} measured steps each",
        pairs.size(), pair_list, min_sm, o->sweep.settle_steps, o->sweep.steps_per_pair);
    for (const auto& a : o->cmd) cm.command += (cm.command.empty() ? "" : " ") + a;
    std::map<std::string, std::vector<model::PairSample>> samples;
    for (std::size_t i = 0; i < result.pairs.size(); ++i)
      for (const auto& [name, e] : result.durations[i])
        samples[name].push_back(
            {{static_cast<int>(std::lround(result.pairs[i].sampled_sm_mhz)), result.pairs[i].locked.mem_mhz},
             e.first / static_cast<double>(e.second)});
    std::size_t unfitted = 0, graph_launches = 0;
    for (const auto& [name, s] : samples) {
      // A graph launch's feed line names the launch, not its kernels (its first kernel's duration came under
      // that name): not a kernel's fit. Its kernels keep their class priors in `plan --model`, which counts them.
      if (trace::graph_id_of_launch_name(name)) {
        ++graph_launches;
        continue;
      }
      try {
        const model::TimeFit f = model::fit_time_pairs(s, ref);
        cm.kernels.push_back({name, f.sm_share, f.mem_share, f.rms_relative_error, s.size()});
      } catch (const std::invalid_argument&) {
        ++unfitted;  // measured at too few pairs
      }
    }
    model::DvfsModel dm(spec);
    model::Workload w = model::build_workload(result.trace, result.steps, dm);
    for (auto& op : w.ops) op.ref = ref, op.ref_sampled = true;  // it ran locked at the reference pair
    sim::apply_model(cm, w, dm);
    const sim::PowerFit pf = sim::fit_board_power(w, dm, cm.pairs);
    cm.activity_scale = pf.activity_scale;
    cm.memory_w_at_max = pf.memory_w_at_max;
    cm.power_rms_relative_error = pf.rms_relative_error;
    fmt::print(stderr,
               "gearshift calibrate: {} kernel names fitted ({} measured at too few pairs, {} CUDA graphs not fitted: "
               "their kernels keep the class priors); board: activity scale {:.3f}, memory/uncore power {:.1f} W, "
               "power fit {:.2f} % rms\n",
               cm.kernels.size(), unfitted, graph_launches, cm.activity_scale, cm.memory_w_at_max,
               100 * cm.power_rms_relative_error);
    if (auto why = sim::implausible_model(cm, spec); !why.empty())
      throw Exit(kModelRefused, fmt::format("calibration refused, no model written: {}", fmt::join(why, "; ")));
    try {
      sim::write_model_file(cm, o->output);
    } catch (const std::runtime_error& e) {
      throw Exit(kFailure, e.what());
    }
    fmt::print(stderr, "gearshift calibrate: model written to {} (use: gearshift plan TRACE --model {})\n", o->output,
               o->output);
  });
}

}  // namespace gearshift::cli
