#include "service/calibrate.hpp"

#include <cmath>
#include <cstdlib>
#include <ctime>
#include <map>
#include <optional>
#include <thread>

#include <fmt/core.h>
#include <fmt/format.h>

#include "cupti/config.hpp"
#include "feed/socket.hpp"
#include "gpu/open_gpus.hpp"
#include "launch/inject_library.hpp"
#include "model/workload.hpp"
#include "runtime/feed_server.hpp"
#include "runtime/session.hpp"
#include "service/error.hpp"

namespace gearshift::service {

namespace {

using Kind = ServiceError::Kind;

std::string utc_now() {
  const std::time_t t = std::time(nullptr);
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

gpu::GpuSpec calibration_spec(const CalibrateOptions& o, const std::string& device_name) {
  std::string spec_name = o.gpu_spec;
  std::string other_board;
  if (spec_name.empty()) spec_name = gpu::spec_name_for_device(device_name, &other_board);
  if (spec_name.empty())
    throw ServiceError(Kind::kBadArgument,
                       fmt::format("GPU {} ('{}') has no spec{}; pass --gpu-spec (known: {}) if it is one of those",
                                   o.gpu, device_name, other_board.empty() ? "" : " (" + other_board + ")",
                                   fmt::join(gpu::spec_names(), ", ")));
  try {
    return gpu::find_spec(spec_name);
  } catch (const std::invalid_argument& e) {
    throw ServiceError(Kind::kBadArgument, std::string("--gpu-spec: ") + e.what());
  }
}

ServiceError denied(unsigned index, const std::string& why) {
  return ServiceError(Kind::kNoPermission,
                      fmt::format("GPU {}: NVML refused to lock the clocks ({}): calibrate needs root or "
                                  "CAP_SYS_ADMIN (and no API restriction, `gearshift gpus`); the clocks were not "
                                  "changed and the job was not started",
                                  index, why));
}

// The first lock, at the reference pair, before the job starts: a refusal leaves the clocks as they were.
// Returns whether memory clocks can be locked.
bool lock_reference(const gpu::Device& dev, const model::ClockPair& ref, ClockGuard& guard, unsigned index,
                    const ProgressSink& sink) {
  if (auto s = dev.set_locked_sm_clocks(static_cast<unsigned>(ref.sm_mhz), static_cast<unsigned>(ref.sm_mhz)); !s) {
    if (s.error().code == gpu::NvmlErrc::kNoPermission) throw denied(index, s.error().what());
    throw ServiceError(Kind::kFailure, fmt::format("GPU {}: locking the SM clock failed: {}", index, s.error().what()));
  }
  guard.touched();
  if (auto s = dev.set_locked_mem_clocks(static_cast<unsigned>(ref.mem_mhz), static_cast<unsigned>(ref.mem_mhz)); !s) {
    if (s.error().code == gpu::NvmlErrc::kNoPermission) {
      guard.reset();
      throw denied(index, s.error().what());
    }
    // e.g. not supported: the pairs keep the default memory clock
    say(sink, fmt::format("gearshift calibrate: memory clocks cannot be locked ({}); measuring SM clocks only",
                          s.error().what()));
    return false;
  }
  return true;
}

// The job's environment, before any thread starts (setenv is not thread-safe): the feed, every kernel's
// activity, no markers.
void set_job_env(const std::string& socket_path, const ProgressSink& sink) {
  setenv(feed::kEnvSocket, socket_path.c_str(), 1);
  try {
    launch::set_injection_env(launch::find_inject_library());
  } catch (const launch::LaunchError& e) {
    say(sink,
        fmt::format("gearshift calibrate: warning: {}; the job is not traced unless it has its own hook", e.what()));
  }
  unsetenv(cupti::kEnvOutput);
  unsetenv(cupti::kEnvFeedActivityPeriodMs);
  setenv(cupti::kEnvFeedMarkerUs, "0", 1);
}

}  // namespace

std::string CalibrationRun::pair_list() const {
  std::string out;
  for (const auto& p : pairs) out += fmt::format("{}{}/{}", out.empty() ? "" : ", ", p.sm_mhz, p.mem_mhz);
  return out;
}

CalibrationRun run_calibration(const CalibrateOptions& o) {
  CalibrationRun run;
  gpu::OpenedGpus gpus = gpu::open_gpus(false);
  if (o.gpu >= gpus.devices.size())
    throw ServiceError(Kind::kBadArgument, fmt::format("--gpu {}: only {} GPU(s)", o.gpu, gpus.devices.size()));
  const gpu::Device dev = gpus.devices[o.gpu];
  const std::string device_name = gpus.infos[o.gpu].name;
  run.spec = calibration_spec(o, device_name);
  if (auto e = dev.total_energy_mj(); !e)
    throw ServiceError(Kind::kNoGpu,
                       fmt::format("GPU {}: no energy counter ({}): calibrate measures power with it (Volta or newer)",
                                   o.gpu, e.error().what()));
  run.ref = {run.spec.default_sm_clock_mhz, run.spec.default_mem_clock_mhz};
  // The permission check, the GPU's lock and the watchdog, as `run --apply` has them (no plan is started: the
  // sweep locks the pairs itself).
  runtime::SessionOptions so;
  so.apply = true;
  so.gpu = o.gpu;
  so.lock_memory = true;
  so.watchdog_exe = o.watchdog_exe;
  std::optional<runtime::Session> session;
  try {
    session.emplace(so);
  } catch (const runtime::SessionError& e) {
    if (e.kind() != runtime::SessionError::Kind::kNoPermission) throw;
    throw denied(o.gpu, e.what());
  }
  // Destroyed before the session: the clocks are reset before the watchdog is told.
  ClockGuard guard(dev, true, o.progress_sink);
  const bool lock_memory = lock_reference(dev, run.ref, guard, o.gpu, o.progress_sink);
  gpu::GpuSpec pair_spec = run.spec;
  if (!lock_memory) pair_spec.mem_clocks_mhz = {run.spec.default_mem_clock_mhz};
  run.min_sm_mhz = o.min_sm_mhz > 0 ? o.min_sm_mhz : run.spec.default_sm_clock_mhz / 2;
  try {
    run.pairs = model::calibration_pairs(pair_spec, run.min_sm_mhz, o.pairs);
  } catch (const std::invalid_argument& e) {
    throw ServiceError(Kind::kBadArgument, e.what());
  }
  run.steps_needed = o.sweep.warmup_steps + run.pairs.size() * (o.sweep.settle_steps + o.sweep.steps_per_pair + 2);
  say(o.progress_sink, fmt::format("gearshift calibrate: {} on GPU {} ({}): pairs (SM/memory MHz) {}",
                                   run.spec.full_name, o.gpu, device_name, run.pair_list()));

  SweepFeed sh;
  runtime::FeedServer* server_ptr = nullptr;
  runtime::FeedServer server(runtime::gpu_resolver(gpus.infos),
                             [&](const runtime::FeedProcess& p, const feed::FeedEvent& e) {
                               std::int64_t f = server_ptr->followed();
                               if (f < 0 && e.kind == feed::FeedEvent::Kind::launch && p.gpu && *p.gpu == o.gpu) {
                                 server_ptr->follow(p.index, "");
                                 f = server_ptr->followed();
                               }
                               // A graph kernel's name (N line) may come before the process is followed:
                               // kept whatever the process (its id is namespaced per connection).
                               if (f == static_cast<std::int64_t>(p.index) || e.kind == feed::FeedEvent::Kind::name)
                                 sh.add(e);
                             });
  server_ptr = &server;
  set_job_env(server.socket_path(), o.progress_sink);

  std::optional<launch::ForwardedSignalsBlocked> blocked;
  blocked.emplace();
  server.start();
  std::thread sweeper([&] {
    SweepOptions sweep_o = o.sweep;
    if (!sweep_o.progress_sink) sweep_o.progress_sink = o.progress_sink;  // one sink for the run's lines
    run.sweep = sweep(sh, dev, lock_memory, guard, run.pairs, sweep_o);
    sh.sweep_over = true;
  });
  run.child = launch::run_child(o.cmd);
  blocked.reset();
  sh.job_ended = true;
  sweeper.join();
  server.stop();
  guard.reset();
  session->stop();  // tells the watchdog the clocks are restored, releases the GPU's lock
  return run;
}

sim::CalibratedModel fit_calibration(const CalibrateOptions& o, const CalibrationRun& r) {
  const SweepResult& result = r.sweep;
  sim::CalibratedModel cm;
  cm.gpu = r.spec.name;
  cm.ref = r.ref;
  cm.pairs = result.pairs;
  if (!result.switch_down_ms.empty() || !result.switch_up_ms.empty())
    cm.switch_latency = sim::SwitchLatency{result.switch_down_ms, result.switch_up_ms};
  cm.created_utc = utc_now();
  cm.pair_choice = fmt::format(
      "{} pairs (SM/memory MHz: {}): the default pair, then greedily the pair with the most information per "
      "minute (gain in log det of the [1, f0/f, m0/m] design over the pair's expected duration), SM >= {} MHz; "
      "{} settle + {} measured steps each",
      r.pairs.size(), r.pair_list(), r.min_sm_mhz, o.sweep.settle_steps, o.sweep.steps_per_pair);
  for (const auto& a : o.cmd) cm.command += (cm.command.empty() ? "" : " ") + a;
  std::map<std::string, std::vector<model::PairSample>> samples;
  for (std::size_t i = 0; i < result.pairs.size(); ++i)
    for (const auto& [name, e] : result.durations[i])
      samples[name].push_back(
          {{static_cast<int>(std::lround(result.pairs[i].sampled_sm_mhz)), result.pairs[i].locked.mem_mhz},
           static_cast<double>(e.first) / static_cast<double>(e.second)});
  std::size_t unfitted = 0;
  for (const auto& [name, s] : samples) {
    try {
      const model::TimeFit f = model::fit_time_pairs(s, r.ref);
      cm.kernels.push_back({name, f.sm_share, f.mem_share, f.rms_relative_error, s.size(), f.law});
    } catch (const std::invalid_argument&) {
      ++unfitted;  // measured at too few pairs
    }
  }
  model::DvfsModel dm(r.spec);
  model::Workload w = model::build_workload(result.trace, result.steps, dm);
  for (auto& op : w.ops) op.ref = r.ref, op.ref_sampled = true;  // it ran locked at the reference pair
  sim::apply_model(cm, w, dm);
  const sim::PowerFit pf = sim::fit_board_power(w, dm, cm.pairs);
  cm.activity_scale = pf.activity_scale;
  cm.memory_w_at_max = pf.memory_w_at_max;
  cm.power_rms_relative_error = pf.rms_relative_error;
  say(o.progress_sink,
      fmt::format("gearshift calibrate: {} kernel names fitted ({} measured at too few pairs); board: activity scale "
                  "{:.3f}, memory/uncore power {:.1f} W, power fit {:.2f} % rms",
                  cm.kernels.size(), unfitted, cm.activity_scale, cm.memory_w_at_max,
                  100 * cm.power_rms_relative_error));
  if (auto why = sim::implausible_model(cm, r.spec); !why.empty())
    throw ServiceError(Kind::kModelRefused,
                       fmt::format("calibration refused, no model written: {}", fmt::join(why, "; ")));
  return cm;
}

}  // namespace gearshift::service
