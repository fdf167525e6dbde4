#include "graph/step_graph.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <stdexcept>

#include <fmt/format.h>

namespace gearshift::graph {

namespace {

// Share of kernel positions that must know their launch for the template to be a dependency graph (less: the
// trace's launch events are partial). Copies and memsets need not: gearshift's CUPTI tracer records kernel
// launches only, and a position without its launch keeps the stream rule (predecessor's end + traced gap).
constexpr double kMinLaunchShare = 0.9;

double low_quantile(std::vector<double> v, double q) {
  if (v.empty()) return 0;
  auto k = static_cast<std::size_t>(q * static_cast<double>(v.size() - 1));
  std::nth_element(v.begin(), v.begin() + static_cast<std::ptrdiff_t>(k), v.end());
  return v[k];
}

}  // namespace

StepGraph build_step_graph(const model::Workload& w) {
  StepGraph g;
  const std::size_t n = w.ops.size();
  g.period_ns = g.cpu_period_ns = w.period_ns;
  const std::size_t known = static_cast<std::size_t>(
      std::count_if(w.ops.begin(), w.ops.end(), [](const model::WorkloadOp& o) { return o.launch_known; }));
  std::size_t kernels = 0, kernels_known = 0;
  for (const auto& o : w.ops)
    if (o.kind == trace::OpKind::kernel) ++kernels, kernels_known += o.launch_known ? 1 : 0;
  if (n == 0 || !(w.period_ns > 0) || known == 0) {
    g.note = w.cpu_note.empty() || w.cpu_note.find("no launch events") != std::string::npos
                 ? "no launch events in the template: replayed by stream order and traced gaps"
                 : "no launch offsets in the template (" + w.cpu_note + "): replayed by stream order and traced gaps";
    return g;
  }
  if (static_cast<double>(kernels_known) < kMinLaunchShare * static_cast<double>(kernels)) {
    g.note = fmt::format("only {} of {} kernel positions know their launch: replayed by stream order and traced gaps",
                         kernels_known, kernels);
    return g;
  }
  g.dependency = true;
  std::map<std::int32_t, std::uint32_t> dense;
  g.stream.resize(n);
  for (std::size_t i = 0; i < n; ++i)
    g.stream[i] = dense.emplace(w.ops[i].stream, static_cast<std::uint32_t>(dense.size())).first->second;
  g.streams = dense.size();
  g.has_launch.resize(n);
  g.launch_ns.resize(n);
  g.traced_end_ns.resize(n);
  for (std::size_t i = 0; i < n; ++i) {
    g.has_launch[i] = w.ops[i].launch_known ? 1 : 0;
    g.launch_ns[i] = w.ops[i].launch_offset_ns;
    g.traced_end_ns[i] = w.ops[i].start_offset_ns + w.ops[i].ref_time_ns;
  }
  // Stream order, and the traced gap (predecessor's end to start) and lag (launch to start) of each op.
  std::vector<std::int32_t> last(g.streams, -1), first(g.streams, -1);
  std::vector<std::int32_t> pred(n, -1);
  g.stream_next.assign(n, 0);
  for (std::size_t i = 0; i < n; ++i) {
    const auto s = g.stream[i];
    pred[i] = last[s];
    if (last[s] >= 0) g.stream_next[static_cast<std::size_t>(last[s])] = static_cast<std::int32_t>(i);
    if (first[s] < 0) first[s] = static_cast<std::int32_t>(i);
    last[s] = static_cast<std::int32_t>(i);
  }
  for (std::size_t s = 0; s < g.streams; ++s) g.stream_next[static_cast<std::size_t>(last[s])] = -1 - first[s];
  std::vector<double> gap(n), lag(n);
  for (std::size_t i = 0; i < n; ++i) {
    const double pred_end = pred[i] >= 0 ? g.traced_end_ns[static_cast<std::size_t>(pred[i])]
                                         : g.traced_end_ns[static_cast<std::size_t>(last[g.stream[i]])] - w.period_ns;
    gap[i] = std::max(0.0, w.ops[i].start_offset_ns - pred_end);
    lag[i] = w.ops[i].start_offset_ns - g.launch_ns[i];
  }
  std::vector<double> lags, gaps = gap;
  for (std::size_t i = 0; i < n; ++i)
    if (g.has_launch[i]) lags.push_back(lag[i]);
  g.typical_latency_ns = std::max(0.0, low_quantile(lags, 0.05));
  g.typical_gap_ns = low_quantile(gaps, 0.05);
  g.latency_ns.resize(n);
  g.min_gap_ns.resize(n);
  g.wait_on.assign(n, -1);
  g.wait_gap_ns.assign(n, 0);
  std::size_t launch_bound = 0, waits = 0;
  // Ops by traced end, for the cross-stream waits: the latest end on another stream at or before a start.
  std::vector<std::size_t> by_end(n);
  for (std::size_t i = 0; i < n; ++i) by_end[i] = i;
  std::sort(by_end.begin(), by_end.end(), [&](auto a, auto b) { return g.traced_end_ns[a] < g.traced_end_ns[b]; });
  for (std::size_t i = 0; i < n; ++i) {
    const double launch_slack = g.has_launch[i] ? lag[i] - g.typical_latency_ns : std::numeric_limits<double>::infinity();
    const double stream_slack = gap[i] - g.typical_gap_ns;
    const double s0 = w.ops[i].start_offset_ns;
    auto it = std::upper_bound(by_end.begin(), by_end.end(), s0, [&](double v, std::size_t q) { return v < g.traced_end_ns[q]; });
    std::int32_t on = -1;
    while (it != by_end.begin()) {
      --it;
      if (s0 - g.traced_end_ns[*it] > kCrossStreamWindowNs) break;
      if (g.stream[*it] != g.stream[i] && *it < i) {
        on = static_cast<std::int32_t>(*it);
        break;
      }
    }
    if (on >= 0) {
      const double wait_gap = s0 - g.traced_end_ns[static_cast<std::size_t>(on)];
      if (wait_gap < std::min(launch_slack, stream_slack)) {
        g.wait_on[i] = on;
        g.wait_gap_ns[i] = wait_gap;
        g.min_gap_ns[i] = std::min(g.typical_gap_ns, gap[i]);
        g.latency_ns[i] = std::min(g.typical_latency_ns, lag[i]);
        ++waits;
        continue;
      }
    }
    if (g.has_launch[i] && launch_slack < stream_slack) {
      g.latency_ns[i] = lag[i];
      g.min_gap_ns[i] = std::min(g.typical_gap_ns, gap[i]);
      ++launch_bound;
    } else {
      g.min_gap_ns[i] = gap[i];
      g.latency_ns[i] = std::min(g.typical_latency_ns, lag[i]);
    }
  }
  // The CPU thread: synchronizes in CPU order; each launch after the last one entered before it.
  for (const auto& ts : w.syncs) {
    StepGraph::Sync y;
    y.enter_ns = ts.enter_offset_ns;
    y.exit_ns = ts.enter_offset_ns + ts.duration_ns;
    g.syncs.push_back(y);
  }
  std::sort(g.syncs.begin(), g.syncs.end(), [](const auto& a, const auto& b) { return a.enter_ns < b.enter_ns; });
  const std::size_t ns = g.syncs.size();
  g.cpu_sync.assign(n, -1);
  for (std::size_t i = 0; i < n; ++i) {
    if (!g.has_launch[i]) continue;
    auto it = std::upper_bound(g.syncs.begin(), g.syncs.end(), g.launch_ns[i],
                               [](double v, const StepGraph::Sync& y) { return v < y.enter_ns; });
    g.cpu_sync[i] = static_cast<std::int32_t>(it - g.syncs.begin()) - 1;
  }
  std::vector<std::int32_t> sync_stream(ns, -1);
  {
    // Scopes and streams follow the template's syncs, sorted the same way.
    std::vector<trace::TemplateSync> sorted = w.syncs;
    std::stable_sort(sorted.begin(), sorted.end(),
                     [](const auto& a, const auto& b) { return a.enter_offset_ns < b.enter_offset_ns; });
    for (std::size_t j = 0; j < ns; ++j) {
      if (sorted[j].scope == trace::SyncRecord::Scope::stream && sorted[j].stream >= 0) {
        auto it = dense.find(sorted[j].stream);
        sync_stream[j] = it == dense.end() ? -2 : static_cast<std::int32_t>(it->second);  // -2: a stream without ops
      }
    }
  }
  std::size_t waiting = 0;
  for (std::size_t j = 0; j < ns; ++j) {
    auto& y = g.syncs[j];
    y.first_after = static_cast<std::uint32_t>(n);
    for (std::size_t i = 0; i < n; ++i)
      if (g.cpu_sync[i] >= static_cast<std::int32_t>(j)) {
        y.first_after = static_cast<std::uint32_t>(i);
        break;
      }
    // Averaging over steps leaves a few µs of noise between a blocking synchronize's return and the end of
    // the op it waited for.
    const double tol = 2e3 + 0.01 * (y.exit_ns - y.enter_ns);
    std::vector<std::int32_t> this_step(g.streams, -1), prev_step(g.streams, -1);
    for (std::size_t i = 0; i < n; ++i) {
      const auto s = g.stream[i];
      if (sync_stream[j] != -1 && sync_stream[j] != static_cast<std::int32_t>(s)) continue;
      const double issued = g.has_launch[i] ? g.launch_ns[i] : w.ops[i].start_offset_ns;
      if (i < y.first_after && issued < y.enter_ns && g.traced_end_ns[i] <= y.exit_ns + tol)
        this_step[s] = static_cast<std::int32_t>(i);
      if (issued - w.period_ns < y.enter_ns && g.traced_end_ns[i] - w.period_ns <= y.exit_ns + tol)
        prev_step[s] = static_cast<std::int32_t>(i);
    }
    double awaited_end = -std::numeric_limits<double>::infinity();
    for (std::size_t s = 0; s < g.streams; ++s) {
      if (this_step[s] >= 0) {
        y.awaited.push_back({static_cast<std::uint32_t>(this_step[s]), false});
        awaited_end = std::max(awaited_end, g.traced_end_ns[static_cast<std::size_t>(this_step[s])]);
      } else if (prev_step[s] >= 0) {
        y.awaited.push_back({static_cast<std::uint32_t>(prev_step[s]), true});
        awaited_end = std::max(awaited_end, g.traced_end_ns[static_cast<std::size_t>(prev_step[s])] - w.period_ns);
      }
    }
    const double d = y.exit_ns - y.enter_ns;
    if (awaited_end > y.enter_ns) {  // it waited: it returns a return latency after the work ends
      y.return_ns = std::clamp(y.exit_ns - awaited_end, 0.0, d);
      y.min_ns = y.return_ns;
      ++waiting;
    } else {  // the work was done: its own cost
      y.return_ns = 0;
      y.min_ns = d;
    }
  }
  g.note = fmt::format(
      "dependency-driven replay: {} positions, {} launch-bound, {} waiting for another stream; launch latency {:.1f} µs, "
      "dispatch gap {:.1f} µs (typical); {} synchronize(s) per step, {} waiting for the GPU{}",
      n, launch_bound, waits, g.typical_latency_ns / 1e3, g.typical_gap_ns / 1e3, ns, waiting,
      w.syncs_known || w.cpu_note.empty() ? "" : " (" + w.cpu_note + ")");
  if (w.cpu_time_scale < 1 || w.cpu_less_per_event_ns > 0) {
    const double traced_cpu = g.cpu_period_ns;
    shrink_cpu_time(g, w.cpu_time_scale, w.cpu_less_per_event_ns);
    const std::string how =
        w.cpu_time_scale == 0 ? fmt::format("the CPU side GPU-bound (its own time at most {:.0f} µs per launch or "
                                            "synchronize)", kMinCpuPerEventNs / 1e3)
        : w.cpu_time_scale == 1 ? fmt::format("the tracer's {:.1f} µs per launch or synchronize taken out of the CPU side",
                                              w.cpu_less_per_event_ns / 1e3)
                                : fmt::format("the CPU's own time scaled by {:.2f}, less {:.1f} µs per call",
                                              w.cpu_time_scale, w.cpu_less_per_event_ns / 1e3);
    g.note += fmt::format("; {}: a CPU period of {:.2f} ms for the traced {:.2f} ms", how, g.cpu_period_ns / 1e6,
                          traced_cpu / 1e6);
  }
  return g;
}

void shrink_cpu_time(StepGraph& g, double scale, double less_ns) {
  if (!(scale >= 0 && scale <= 1)) throw std::invalid_argument(fmt::format("shrink_cpu_time: scale {} outside [0, 1]", scale));
  if (!(less_ns >= 0)) throw std::invalid_argument(fmt::format("shrink_cpu_time: negative cost per call {}", less_ns));
  if (!g.dependency || (scale == 1 && less_ns == 0)) return;
  // Breakpoints of the CPU timeline over one step: launches, synchronize entries and exits, and the next step's
  // first event. A stretch inside a synchronize keeps its length; any other shrinks, kept at the least cost of the
  // call that ends it.
  struct Point {
    double t;
    int inside_delta;  // +1 a synchronize's entry, -1 its exit, 0 a launch
  };
  std::vector<Point> pts;
  for (std::size_t i = 0; i < g.launch_ns.size(); ++i)
    if (g.has_launch[i]) pts.push_back({g.launch_ns[i], 0});
  for (const auto& y : g.syncs) pts.push_back({y.enter_ns, +1}), pts.push_back({std::max(y.exit_ns, y.enter_ns), -1});
  if (pts.empty()) return;
  // Entries before exits at one time, so that a zero-length synchronize opens and closes in order.
  std::sort(pts.begin(), pts.end(), [](const Point& a, const Point& b) {
    return a.t < b.t || (a.t == b.t && a.inside_delta > b.inside_delta);
  });
  const double first = pts.front().t;
  std::vector<double> old_t{first}, new_t{first};
  int inside = 0;
  auto add = [&](double t, bool cpu_work) {
    const double d = t - old_t.back();
    if (d <= 0) return;
    const double shrunk = cpu_work ? std::min(d, std::max(scale * d - less_ns, kMinCpuPerEventNs)) : d;
    old_t.push_back(t);
    new_t.push_back(new_t.back() + shrunk);
  };
  for (const Point& p : pts) {
    add(p.t, inside == 0);
    inside += p.inside_delta;
  }
  add(first + g.cpu_period_ns, inside == 0);  // to the next step's first event
  auto map = [&](double t) {  // piecewise linear through the breakpoints; beyond them, slope 1
    if (t <= old_t.front()) return new_t.front() + (t - old_t.front());
    if (t >= old_t.back()) return new_t.back() + (t - old_t.back());
    const std::size_t k = static_cast<std::size_t>(std::upper_bound(old_t.begin(), old_t.end(), t) - old_t.begin());
    const double a = old_t[k - 1], b = old_t[k];
    return new_t[k - 1] + (t - a) / (b - a) * (new_t[k] - new_t[k - 1]);
  };
  for (std::size_t i = 0; i < g.launch_ns.size(); ++i)
    if (g.has_launch[i]) g.launch_ns[i] = map(g.launch_ns[i]);
  for (auto& y : g.syncs) {
    const double enter = map(y.enter_ns);
    y.exit_ns = enter + (y.exit_ns - y.enter_ns);
    y.enter_ns = enter;
  }
  g.cpu_period_ns = map(first + g.cpu_period_ns) - map(first);
}

std::vector<double> free_float_ns(const StepGraph& g, const StepTiming& t) {
  const std::size_t n = t.start_ns.size();
  std::vector<double> latest(n, std::numeric_limits<double>::infinity());  // latest end that delays nothing
  for (std::size_t i = 0; i < n; ++i) {
    const std::int32_t nx = g.stream_next[i];
    const std::size_t q = nx >= 0 ? static_cast<std::size_t>(nx) : static_cast<std::size_t>(-1 - nx);
    const double succ_start = t.start_ns[q] + (nx >= 0 ? 0.0 : t.step_ns);
    latest[i] = succ_start - g.min_gap_ns[q];
  }
  for (std::size_t i = 0; i < n; ++i)
    if (g.wait_on[i] >= 0) {
      auto& l = latest[static_cast<std::size_t>(g.wait_on[i])];
      l = std::min(l, t.start_ns[i] - g.wait_gap_ns[i]);
    }
  for (std::size_t j = 0; j < g.syncs.size(); ++j) {
    const auto& y = g.syncs[j];
    for (const auto& a : y.awaited) {
      // The op of the step before bounds this step's synchronize: in the measured step, the next step's.
      const double bound = t.sync_exit_ns[j] - y.return_ns + (a.previous_step ? t.step_ns : 0.0);
      latest[a.position] = std::min(latest[a.position], bound);
    }
  }
  std::vector<double> f(n);
  for (std::size_t i = 0; i < n; ++i) f[i] = std::max(0.0, latest[i] - t.end_ns[i]);
  return f;
}

StepTiming replay_fixed(const StepGraph& g, const std::vector<double>& durations_ns) {
  StepTiming t = replay_steps(g, [&](std::size_t, std::size_t i, double) { return durations_ns[i]; });
  return t;
}

}  // namespace gearshift::graph
