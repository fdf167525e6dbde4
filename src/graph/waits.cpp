#include "graph/waits.hpp"

#include <algorithm>
#include <limits>
#include <stdexcept>
#include <string>

namespace gearshift::graph {

std::string_view to_string(WaitKind k) {
  switch (k) {
    case WaitKind::launch_bound: return "launch-bound";
    case WaitKind::synchronize: return "synchronize";
    case WaitKind::cross_stream: return "cross-stream";
    case WaitKind::collective: return "collective";
    case WaitKind::none: break;
  }
  return "none";
}

std::string_view json_key(WaitKind k) {
  switch (k) {
    case WaitKind::launch_bound: return "launch_bound";
    case WaitKind::synchronize: return "synchronize";
    case WaitKind::cross_stream: return "cross_stream";
    case WaitKind::collective: return "collective";
    case WaitKind::none: break;
  }
  return "none";
}

namespace {

// A constraint within this of a start decided it (the replay's sums are exact up to rounding), ns.
constexpr double kTightNs = 1.0;

}  // namespace

std::vector<OpWait> waits_after(const StepGraph& g, const StepTiming& t, const std::vector<std::uint8_t>& communication) {
  const std::size_t n = t.start_ns.size();
  if (!g.dependency) throw std::invalid_argument("waits_after: not a dependency graph (" + g.note + ")");
  if (g.stream.size() != n || t.end_ns.size() != n || communication.size() != n)
    throw std::invalid_argument("waits_after: " + std::to_string(g.stream.size()) + " graph positions, " +
                                std::to_string(n) + " replayed, " + std::to_string(communication.size()) + " kinds");
  constexpr double kInf = std::numeric_limits<double>::infinity();
  const std::size_t ns = g.syncs.size();
  // A synchronize that waited for the GPU: its exit is the awaited work's end plus its return latency.
  std::vector<std::uint8_t> sync_waited(ns, 0);
  for (std::size_t j = 0; j < ns && j < t.sync_exit_ns.size(); ++j) {
    double gpu = -kInf;
    for (const auto& a : g.syncs[j].awaited) gpu = std::max(gpu, t.end_ns[a.position] - (a.previous_step ? t.step_ns : 0.0));
    sync_waited[j] = gpu + g.syncs[j].return_ns >= t.sync_exit_ns[j] - kTightNs;
  }
  // The first launch after each synchronize (index ns: the step's first launches, after the last one of the step
  // before): the op the GPU waits for once the CPU returns.
  std::vector<double> first_launch(ns + 1, kInf);
  auto after = [&](std::size_t q) {
    const std::int32_t j = g.cpu_sync[q];
    return j >= 0 ? static_cast<std::size_t>(j) : ns;
  };
  for (std::size_t q = 0; q < n; ++q)
    if (g.has_launch[q]) first_launch[after(q)] = std::min(first_launch[after(q)], g.launch_ns[q]);
  // Why each op started when it did.
  std::vector<double> stream_ready(n, -kInf);
  for (std::size_t i = 0; i < n; ++i) {
    const std::int32_t nx = g.stream_next[i];
    if (nx >= 0) stream_ready[static_cast<std::size_t>(nx)] = t.end_ns[i] + g.min_gap_ns[static_cast<std::size_t>(nx)];
    else {  // the stream's first op of the next step: its predecessor is this op of the step before (steady state)
      const auto q = static_cast<std::size_t>(-1 - nx);
      stream_ready[q] = t.end_ns[i] - t.step_ns + g.min_gap_ns[q];
    }
  }
  std::vector<WaitKind> held(n, WaitKind::none);
  for (std::size_t q = 0; q < n; ++q) {
    const double start = t.start_ns[q];
    if (stream_ready[q] >= start - kTightNs) continue;  // followed its stream back to back
    const std::int32_t w = g.wait_on[q];
    if (w >= 0 && t.end_ns[static_cast<std::size_t>(w)] + g.wait_gap_ns[q] >= start - kTightNs) {
      held[q] = communication[q] || communication[static_cast<std::size_t>(w)] ? WaitKind::collective : WaitKind::cross_stream;
      continue;
    }
    if (!g.has_launch[q]) continue;
    const std::size_t j = after(q);
    const std::size_t sync = j < ns ? j : ns - 1;  // the step's first launches follow the previous step's last one
    const bool waited = ns > 0 && sync_waited[sync] != 0;
    held[q] = waited && g.launch_ns[q] <= first_launch[j] ? WaitKind::synchronize : WaitKind::launch_bound;
  }
  // Each op's float ends at its tightest successor (free_float_ns's bounds), whose wait is the float's kind; the
  // stream successor's bound is kept apart for the chains of back-to-back ops.
  std::vector<double> latest(n, kInf), other(n, kInf), on_stream(n, kInf);
  std::vector<WaitKind> kind(n, WaitKind::none);
  auto bound = [&](std::size_t i, double at, WaitKind k) {
    other[i] = std::min(other[i], at);
    if (at < latest[i]) latest[i] = at, kind[i] = k;
  };
  for (std::size_t i = 0; i < n; ++i) {
    const std::int32_t nx = g.stream_next[i];
    const std::size_t q = nx >= 0 ? static_cast<std::size_t>(nx) : static_cast<std::size_t>(-1 - nx);
    on_stream[i] = latest[i] = t.start_ns[q] + (nx >= 0 ? 0.0 : t.step_ns) - g.min_gap_ns[q];
    kind[i] = held[q];
  }
  for (std::size_t k = 0; k < n; ++k)
    if (g.wait_on[k] >= 0) bound(static_cast<std::size_t>(g.wait_on[k]), t.start_ns[k] - g.wait_gap_ns[k], held[k]);
  for (std::size_t j = 0; j < ns && j < t.sync_exit_ns.size(); ++j)
    for (const auto& a : g.syncs[j].awaited)
      bound(a.position, t.sync_exit_ns[j] - g.syncs[j].return_ns + (a.previous_step ? t.step_ns : 0.0),
            sync_waited[j] ? WaitKind::none : WaitKind::launch_bound);  // reached late: the CPU's own time
  std::vector<OpWait> out(n);
  for (std::size_t i = 0; i < n; ++i) {
    out[i].float_ns = std::max(0.0, latest[i] - t.end_ns[i]);
    out[i].kind = out[i].float_ns > 0 ? kind[i] : WaitKind::none;
    const std::int32_t nx = g.stream_next[i];
    const double other_float = other[i] - t.end_ns[i];
    if (nx >= 0 && held[static_cast<std::size_t>(nx)] == WaitKind::none && on_stream[i] - t.end_ns[i] <= kTightNs &&
        other_float > kTightNs)
      out[i].chain_next = nx, out[i].chain_cap_ns = other_float;
  }
  return out;
}

}  // namespace gearshift::graph
