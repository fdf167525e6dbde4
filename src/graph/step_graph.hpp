// The dependency graph of one training step and its replay (trace-driven what-if simulation in the manner of
// Daydream, Zhu et al. ATC'20, and Lumos, Liang et al. MLSys'25: the trace's CPU launches, stream order and
// synchronizes are the graph; a what-if changes op durations and the graph says what moves).
//
// Rules (positions are the template's, sim/simulator.hpp replays them step after step):
// - A GPU op starts at max(its launch + launch latency, its stream predecessor's end + the stream's dispatch
//   gap); the predecessor of a stream's first op is that stream's last op of the step before.
// - The CPU thread's timeline is the traced one (launch offsets, synchronize entries), shifted only where it
//   waits: a synchronize returns at max(its entry + its own cost, the end of the GPU work it awaits + the
//   traced return latency), and every later CPU event (launches, the next step's too) moves by the change of
//   its return time. A device synchronize (or one whose stream is unknown) awaits every op launched before it;
//   a stream synchronize the ops of its stream; an event synchronize (its event is not recorded) the ops
//   launched before it that the trace shows ended before it returned.
// - Launch latency and dispatch gap: per op, from the trace. Which constraint decided a traced start is the one
//   closer to binding after removing the trace's typical latency λ and gap δ (low quantiles over the step);
//   the op keeps its traced lag or gap for that constraint and λ or δ for the other. So at the traced
//   durations the replay reproduces the template's starts (up to averaging over steps), and what changes
//   under a what-if is decided by the graph.
// - A template without launch events (or with steps of unequal length, whose offsets are not one step's)
//   is not a dependency graph: `dependency` is false, `note` says why, and sim/simulator.hpp falls back to
//   its rule (an op starts when its stream is free plus its traced gap, never before the op ahead of it).
// - Cross-stream event waits (cudaStreamWaitEvent) are not in the trace formats gearshift reads; they are
//   inferred from timing: an op whose traced start follows another stream's op's end by less than its own
//   launch and stream constraints explain (after λ and δ), and by at most kCrossStreamWindowNs, waits for that
//   op (the NCCL stream waiting for the gradients' last kernel, a copy waiting for its producer).
// Not modelled: a full launch queue blocking the CPU (a CPU that ran ahead stays ahead), CPU work that itself
// depends on GPU clocks.
#pragma once

#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "model/workload.hpp"

namespace gearshift::graph {

struct StepGraph {
  bool dependency = false;  // false: the fallback rule (sim/simulator.hpp)
  std::string note;         // what the graph holds or why there is none (plain words)
  double period_ns = 0;     // the traced step, ns
  double cpu_period_ns = 0; // the CPU program's period (step k's CPU origin is k times it), ns: the traced step
                            // unless shrink_cpu_time shortened the CPU's own time
  std::size_t streams = 0;
  std::vector<std::uint32_t> stream;     // per position: dense stream index
  std::vector<std::uint8_t> has_launch;  // per position: its launch is known
  std::vector<double> launch_ns;         // launch CPU time relative to the step's CPU origin, ns
  std::vector<double> latency_ns;        // launch to start (at least), ns
  std::vector<double> min_gap_ns;        // stream predecessor's end to start (at least), ns
  std::vector<std::int32_t> cpu_sync;    // last synchronize of the step before its launch (-1: none this step)
  std::vector<std::int32_t> stream_next; // next position on its stream; < 0: -1 - (first position, next step)
  std::vector<double> traced_end_ns;     // template end (start offset + duration), ns
  std::vector<std::int32_t> wait_on;     // position on another stream it waits for (this step), -1: none
  std::vector<double> wait_gap_ns;       // from that op's end to its start (at least), ns
  struct Awaited {
    std::uint32_t position = 0;
    bool previous_step = false;  // the op of the step before
  };
  struct Sync {
    double enter_ns = 0, exit_ns = 0;  // traced CPU times relative to the step's CPU origin, ns
    double min_ns = 0;                 // its duration when it does not wait, ns
    double return_ns = 0;              // from the awaited work's end to its return, ns
    std::vector<Awaited> awaited;      // the last awaited op per stream (ends on a stream are in order)
    std::uint32_t first_after = 0;     // first position launched after it (all awaited ones come before)
  };
  std::vector<Sync> syncs;
  double typical_latency_ns = 0, typical_gap_ns = 0;  // λ and δ
};

// The graph of `w`; where w.cpu_time_scale < 1, its CPU timeline shrunk by shrink_cpu_time (said in `note`).
StepGraph build_step_graph(const model::Workload& w);

// The least CPU time one launch or synchronize call takes, ns: an empty kernel's launch measured 3.06-4.11 us on
// an H200 with nothing traced (bench/device/launch_cost_phases.cu, bench/results/2026-12-03-overhead.md, session 17);
// the lower end.
inline constexpr double kMinCpuPerEventNs = 3000;

// Shrinks the CPU's own time (what a profiler inflates): every stretch d of the CPU timeline that ends at a launch,
// a synchronize's entry or the next step's first event becomes min(d, max(scale * d - less_ns, kMinCpuPerEventNs));
// the time inside a synchronize (its wait for the GPU, which the replay recomputes) is kept. Launch times,
// synchronizes and cpu_period_ns are mapped; op latencies and stream gaps (GPU side) are left alone. scale 0: the
// GPU-bound replay (the CPU never holds the GPU back by more than its calls' least cost); scale 1 with less_ns: a
// tracer's cost per call taken out. No effect without the dependency graph. Throws std::invalid_argument for a
// scale outside [0, 1] or a negative less_ns.
void shrink_cpu_time(StepGraph& g, double scale, double less_ns = 0);

// The replay of successive steps until the step length repeats (steady state).
struct StepTiming {
  std::size_t steps = 0;      // steps replayed
  std::size_t measured = 0;   // the step reported
  bool converged = false;     // its length equals the previous step's
  double step_ns = 0;         // next step's start − its start, ns
  double origin_ns = 0;       // its start (position 0's start), absolute ns
  std::vector<double> start_ns, end_ns;  // per position, measured step, absolute ns
  std::vector<double> sync_exit_ns;      // per synchronize, measured step, absolute ns
};

inline constexpr std::size_t kMaxReplaySteps = 8;
inline constexpr double kCrossStreamWindowNs = 20e3;  // an inferred event wait follows its op's end within this

// Replays with op durations from `duration(step, position, start_ns)` (ns). Steps start from the traced state
// (the step before the first ran as traced); the measured step is the first whose length equals the one
// before it within 1e-9 relative (else the last full step, converged false). `duration` is called for every
// position of every step replayed, in position order within a step.
template <class Duration>
StepTiming replay_steps(const StepGraph& g, Duration&& duration);

// Free float per position (ns): how much longer the op may run, on `t` (its measured step), before it delays
// any op or synchronize after it; using every op's float at once delays nothing.
std::vector<double> free_float_ns(const StepGraph& g, const StepTiming& t);

// Replay with fixed durations per position (ns): starts relative to the measured step's start, its length.
StepTiming replay_fixed(const StepGraph& g, const std::vector<double>& durations_ns);

// ---- implementation ----

template <class Duration>
StepTiming replay_steps(const StepGraph& g, Duration&& duration) {
  const std::size_t n = g.stream.size(), ns = g.syncs.size();
  constexpr double kNone = -std::numeric_limits<double>::infinity();
  StepTiming out;
  std::vector<double> free(g.streams, kNone);
  for (std::size_t i = 0; i < n; ++i) {  // the step before the first: as traced
    double e = g.traced_end_ns[i] - g.period_ns;
    free[g.stream[i]] = std::max(free[g.stream[i]], e);
  }
  std::vector<double> start[2], end[2], exits[2];
  for (int b = 0; b < 2; ++b) start[b].assign(n, 0), end[b].assign(n, 0), exits[b].assign(ns, 0);
  for (std::size_t i = 0; i < n; ++i) end[1][i] = g.traced_end_ns[i] - g.period_ns;  // "step -1"
  std::vector<double> shift_after(ns, 0);
  std::vector<double> step_start;
  double carried_shift = 0;
  for (std::size_t k = 0; k < kMaxReplaySteps; ++k) {
    const std::size_t cur = k % 2, prev = 1 - cur;
    const double origin = static_cast<double>(k) * g.cpu_period_ns;
    std::size_t resolved = 0;
    auto resolve_to = [&](std::size_t j) {  // synchronizes 0..j of this step, in CPU order
      for (; resolved <= j && resolved < ns; ++resolved) {
        const auto& y = g.syncs[resolved];
        const double before = resolved == 0 ? carried_shift : shift_after[resolved - 1];
        double gpu = kNone;
        for (const auto& a : y.awaited) gpu = std::max(gpu, a.previous_step ? end[prev][a.position] : end[cur][a.position]);
        const double exit = std::max(origin + y.enter_ns + before + y.min_ns, gpu + y.return_ns);
        exits[cur][resolved] = exit;
        shift_after[resolved] = exit - (origin + y.exit_ns);
      }
    };
    for (std::size_t i = 0; i < n; ++i) {
      const std::uint32_t s = g.stream[i];
      double t = free[s] + g.min_gap_ns[i];
      if (g.has_launch[i]) {
        const std::int32_t j = g.cpu_sync[i];
        double shift = carried_shift;
        if (j >= 0) {
          resolve_to(static_cast<std::size_t>(j));
          shift = shift_after[static_cast<std::size_t>(j)];
        }
        t = std::max(t, origin + g.launch_ns[i] + shift + g.latency_ns[i]);
      }
      if (g.wait_on[i] >= 0) t = std::max(t, end[cur][static_cast<std::size_t>(g.wait_on[i])] + g.wait_gap_ns[i]);
      const double d = duration(k, i, t);
      start[cur][i] = t;
      end[cur][i] = free[s] = t + d;
    }
    if (ns > 0) {
      resolve_to(ns - 1);
      carried_shift = shift_after[ns - 1];
    }
    step_start.push_back(n ? start[cur][0] : origin);
    out.steps = k + 1;
    if (k >= 2) {
      const double a = step_start[k - 1] - step_start[k - 2], b = step_start[k] - step_start[k - 1];
      if (std::abs(b - a) <= 1e-9 * std::max(std::abs(b), 1.0)) {
        out.converged = true;
        break;
      }
    }
  }
  out.measured = out.steps - 2;
  const std::size_t mb = out.measured % 2;
  out.origin_ns = step_start[out.measured];
  out.step_ns = step_start[out.measured + 1] - step_start[out.measured];
  out.start_ns = std::move(start[mb]);
  out.end_ns = std::move(end[mb]);
  out.sync_exit_ns = std::move(exits[mb]);
  return out;
}

}  // namespace gearshift::graph
