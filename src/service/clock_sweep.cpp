#include "service/clock_sweep.hpp"

#include <algorithm>
#include <cstdlib>
#include <chrono>
#include <cmath>
#include <functional>
#include <thread>

#include <fmt/core.h>

#include "monitor/counter_tick.hpp"
#include "runtime/live.hpp"
#include "trace/graph_units.hpp"

namespace gearshift::service {

void ClockGuard::report(const gpu::NvmlError& e, const char* which) const {
  say(sink_, fmt::format("gearshift calibrate: could not reset the {} clocks: {}", which, e.what()));
}

void SweepFeed::add(const feed::FeedEvent& e) {
  if (sweep_over) return;
  std::lock_guard<std::mutex> g(mu);
  warmup.add(e);
  if (e.kind == feed::FeedEvent::Kind::name) {
    graph_names[e.name_id] = std::string(e.name);
  } else if (e.kind == feed::FeedEvent::Kind::launch) {
    // A graph launch's one L line names no kernel: its kernels' C lines name themselves (N lines).
    if (!trace::graph_id_of_launch_name(e.name)) pending[e.correlation] = std::string(e.name);
  } else if (e.kind == feed::FeedEvent::Kind::complete) {
    if (e.name_id >= 0) {  // a graph's kernel: fitted under its own name like any other
      if (auto n = graph_names.find(e.name_id); n != graph_names.end())
        done.push_back({n->second, e.gpu_start_ns, e.gpu_end_ns});
      return;
    }
    auto it = pending.find(e.correlation);
    if (it == pending.end()) return;
    done.push_back({std::move(it->second), e.gpu_start_ns, e.gpu_end_ns});
    pending.erase(it);
  }
}

namespace {

using Clock = std::chrono::steady_clock;

// The energy counter advances in ticks (about every 100 ms on H200, DESIGN.md), so a window from one tick's
// start to another's holds whole ticks of energy; its length must be known as well as its energy: each edge is
// read at a tick (monitor/counter_tick.hpp), polling every ms, a loosely bracketed tick passed over.
bool next_tick(const gpu::Device& dev, std::uint64_t& mj, std::int64_t& at_ns, const std::function<bool()>& stop,
               std::string& error) {
  std::string read_error;
  monitor::CounterSource src{[&dev, &read_error]() -> std::optional<std::uint64_t> {
                               auto e = dev.total_energy_mj();
                               if (!e) return read_error = e.error().what(), std::nullopt;
                               return e.value();
                             },
                             [] { return runtime::monotonic_ns(); },
                             [](monitor::Ns ns) { std::this_thread::sleep_for(std::chrono::nanoseconds(ns)); }};
  monitor::TickWait w;  // until a tick: the window waits for it
  w.stop = stop;
  const std::optional<monitor::CounterAtTick> t = monitor::read_at_tick(src, w, &error);
  if (!t) {
    if (!read_error.empty()) error = read_error;
    else if (error == "stopped") error = "the job ended";
    return false;
  }
  mj = static_cast<std::uint64_t>(std::llround(t->j * 1e3));
  at_ns = t->t_ns;
  return true;
}

// Kernels completed that started at or after `from_ns` (monotonic), counted from index `from_index` on.
std::size_t started_since(SweepFeed& sh, std::int64_t from_ns) {
  std::lock_guard<std::mutex> g(sh.mu);
  return static_cast<std::size_t>(std::count_if(sh.done.begin(), sh.done.end(),
                                                [&](const SweepKernel& d) { return d.start_ns >= from_ns; }));
}

}  // namespace

SweepResult sweep(SweepFeed& sh, const gpu::Device& dev, bool lock_memory, ClockGuard& guard,
                  const std::vector<model::ClockPair>& pairs, const SweepOptions& o) {
  SweepResult r;
  const auto t0 = Clock::now();
  auto elapsed_ns = [&] { return std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now() - t0).count(); };
  auto stop = [&] { return sh.job_ended.load() || elapsed_ns() > o.timeout_ns; };
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
  // The switch latency of a lock (issue 45): from just before the lock call until NVML's sampled SM clock shows the
  // new clock (within 2 %, at least 15 MHz: a board near its power cap sags a little), reads 0.5 ms apart, for at
  // most 1 s (then counted as unreached: a clock the board does not hold).
  auto lock_timed = [&](const model::ClockPair& p) {
    const auto before = dev.sm_clock_mhz();
    const auto called = Clock::now();
    auto s = dev.set_locked_sm_clocks(static_cast<unsigned>(p.sm_mhz), static_cast<unsigned>(p.sm_mhz));
    if (!s || !before || static_cast<int>(before.value()) == p.sm_mhz) return s;
    const int tol = std::max(15, p.sm_mhz / 50);
    while (Clock::now() - called < std::chrono::seconds(1)) {
      const auto c = dev.sm_clock_mhz();
      if (c && std::abs(static_cast<int>(c.value()) - p.sm_mhz) <= tol) {
        const double ms = std::chrono::duration<double, std::milli>(Clock::now() - called).count();
        (p.sm_mhz < static_cast<int>(before.value()) ? r.switch_down_ms : r.switch_up_ms).push_back(ms);
        return s;
      }
      std::this_thread::sleep_for(std::chrono::microseconds(500));
    }
    ++r.switches_unreached;
    return s;
  };
  for (std::size_t i = 0; i < pairs.size(); ++i) {
    const auto& p = pairs[i];
    auto s = lock_timed(p);
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
    // The window holds the measured steps and lasts min_window_ns, so that the ticks' instants (known to a few
    // ms) move the power by little.
    auto long_enough = [&] {
      while (runtime::monotonic_ns() - a < o.min_window_ns) {
        if (stop()) return false;
        std::this_thread::sleep_for(std::chrono::milliseconds(5));
      }
      return true;
    };
    if (!wait_for(a, o.steps_per_pair * per_step) || !long_enough() || !next_tick(dev, e1, b, stop, why)) {
      if (r.error.empty()) r.error = why.empty() ? "" : "energy counter: " + why;
      break;
    }
    const double clock_b = dev.sm_clock_mhz().value_or(static_cast<unsigned>(p.sm_mhz));
    sim::PairMeasurement m;
    m.locked = p;
    m.sampled_sm_mhz = 0.5 * (clock_a + clock_b);
    m.window_ns = b - a;
    m.average_power_w = static_cast<double>(e1 - e0) * 1e-3 / (static_cast<double>(m.window_ns) * 1e-9);  // mJ, ns
    std::map<std::string, std::pair<std::int64_t, std::size_t>> by_name;
    {
      std::lock_guard<std::mutex> g(sh.mu);
      for (const auto& d : sh.done)
        if (d.start_ns >= a && d.end_ns <= b) {
          auto& e = by_name[d.name];
          e.first += d.end_ns - d.start_ns;
          ++e.second;
          ++m.kernels;
        }
    }
    m.steps = static_cast<double>(m.kernels) / static_cast<double>(per_step);
    r.pairs.push_back(m);
    r.durations.push_back(std::move(by_name));
    say(o.progress_sink,
        fmt::format("gearshift calibrate: pair {}/{}: SM {} MHz, memory {} MHz: {:.1f} steps in {:.2f} s, {:.1f} W",
                    i + 1, pairs.size(), p.sm_mhz, p.mem_mhz, m.steps, static_cast<double>(m.window_ns) * 1e-9, m.average_power_w));
  }
  // Back up to the first (reference) pair once, for a raise's latency, before the reset.
  if (r.pairs.size() == pairs.size() && pairs.size() >= 2 && pairs.back().sm_mhz != pairs.front().sm_mhz)
    (void)lock_timed(pairs.front());
  guard.reset();
  if (r.error.empty() && r.pairs.size() < pairs.size())
    r.error = sh.job_ended ? fmt::format("the job ended after {} of the {} clock pairs", r.pairs.size(), pairs.size())
                           : "the sweep ran past --timeout";
  return r;
}

}  // namespace gearshift::service
