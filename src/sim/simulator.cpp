#include "sim/simulator.hpp"

#include "graph/board_gaps.hpp"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <functional>
#include <string>
#include <limits>
#include <stdexcept>
#include <utility>

namespace gearshift::sim {

plan::Schedule default_schedule(const model::Workload& w, const model::DvfsModel& m) {
  model::ClockPair def{m.spec().default_sm_clock_mhz, m.spec().default_mem_clock_mhz};
  return plan::Schedule{plan::Strategy::baseline, 0, std::vector<model::ClockPair>(w.ops.size(), def), 0};
}

namespace {

constexpr double kNever = -std::numeric_limits<double>::infinity();

// The ops of one step on the board, for the fall of its power to idle in the gaps between them.
struct BusySpans {
  std::vector<double> start_ns, end_ns;  // per op (position order)
  void resize(std::size_t n) { start_ns.resize(n), end_ns.resize(n); }
  void set(std::size_t i, double start, double end) { start_ns[i] = start, end_ns[i] = end; }
};

// Each op's power above idle at the default clocks, W: what the board's fall to idle after it starts from. Taken
// at the default clocks whatever the plan (measured only there, bench/device/gap_power.py), so a plan's saving
// never counts a smaller fall after a slower kernel.
std::vector<double> fall_from_w(const model::Workload& w, const model::DvfsModel& m) {
  const model::ClockPair def{m.spec().default_sm_clock_mhz, m.spec().default_mem_clock_mhz};
  std::vector<double> out(w.ops.size());
  for (std::size_t i = 0; i < w.ops.size(); ++i) {
    const auto& op = w.ops[i];
    const model::Prediction p = model::predict_op(m, op, def);
    out[i] = p.power_w - p.idle_power_w;
  }
  return out;
}

// J above the idle power in the board's gaps up to `next_start_ns` (the next step's first op start); `fall_w`
// per op from fall_from_w.
double gap_tails_j(const BusySpans& b, const std::vector<double>& fall_w, double next_start_ns,
                   const model::DvfsModel& m) {
  if (!(m.params().gap_decay_ns > 0) || b.start_ns.empty()) return 0;
  const std::vector<double> gap = graph::board_gaps_after_ns(b.start_ns, b.end_ns, next_start_ns);
  double j = 0;
  for (std::size_t i = 0; i < gap.size(); ++i)
    if (gap[i] > 0) j += std::max(0.0, fall_w[i]) * m.gap_tail_ns(gap[i]) * 1e-9;
  return j;
}

struct Change {
  double at_ns;  // when it lands, relative to the step start
  model::ClockPair clocks;
};

// What one step inherits from the one before it.
struct Carry {
  model::ClockPair in_effect;   // clocks of the last op started (ops and idle power)
  std::vector<Change> pending;  // changes landing in this step (relative times, may be <= 0), in order
  double last_land_ns = kNever; // when the previous change landed (relative: <= 0 or pending)
};

struct StepOut {
  SimResult r;
  Carry next;
  double first_change_start_ns = 0;  // start of the op whose change was issued first (if any)
};

StepOut run_step(const model::Workload& w, const model::DvfsModel& m, const plan::Schedule& s, double latency_ns,
                 const Carry& in, bool keep_timeline) {
  StepOut out;
  SimResult& r = out.r;
  const std::size_t n = w.ops.size();
  std::vector<Change> changes{{kNever, in.in_effect}};
  changes.insert(changes.end(), in.pending.begin(), in.pending.end());
  std::size_t landed = 0;  // index of the change in effect at the current time
  model::ClockPair last_requested = s.clocks[n - 1];
  double last_land = in.last_land_ns;
  for (const auto& p : in.pending) last_land = p.at_ns;
  std::vector<std::pair<std::int32_t, double>> stream_free;  // stream -> time it is free, ns (few streams)
  double prev_start = 0, step_end = 0, dynamic_j = 0, idle_j = 0;
  model::ClockPair idle_clocks = in.in_effect;  // clocks of the last op started: the board's idle power
  double idle_from = 0;
  const bool tails = m.params().gap_decay_ns > 0;
  BusySpans spans;
  std::vector<double> fall_w;
  if (tails) spans.resize(n), fall_w = fall_from_w(w, m);
  bool first_change = true;
  for (std::size_t i = 0; i < n; ++i) {
    const auto& op = w.ops[i];
    auto sf = std::find_if(stream_free.begin(), stream_free.end(), [&](const auto& e) { return e.first == op.stream; });
    if (sf == stream_free.end()) sf = stream_free.insert(stream_free.end(), {op.stream, 0.0});
    const double start = std::max(sf->second + op.gap_before_ns, prev_start);
    if (!(s.clocks[i] == last_requested)) {
      // Issued L before op i starts, but not before the previous change landed.
      double land = std::max(start, last_land + latency_ns);
      if (land > start) ++r.late_changes;
      if (first_change) out.first_change_start_ns = start, first_change = false;
      changes.push_back({land, s.clocks[i]});
      last_land = land;
      last_requested = s.clocks[i];
      ++r.clock_changes;
    }
    // Changes land in issue order, so the last one landed by `start` is in effect.
    while (landed + 1 < changes.size() && changes[landed + 1].at_ns <= start) ++landed;
    const model::ClockPair c = changes[landed].clocks;
    idle_j += m.idle_power_w(idle_clocks.sm_mhz) * (start - idle_from) * 1e-9;
    idle_clocks = c, idle_from = start;
    auto p = model::predict_op(m, op, c);
    double end = start + p.time_ns;
    dynamic_j += (p.power_w - p.idle_power_w) * p.time_ns * 1e-9;
    if (tails) spans.set(i, start, end);
    r.busy_time_ns += p.time_ns;
    sf->second = end;
    prev_start = start;
    step_end = std::max(step_end, end);
    if (keep_timeline) r.timeline.push_back({i, start, end, c, p.effective_sm_mhz, p.power_w});
  }
  step_end += w.tail_ns;
  idle_j += m.idle_power_w(idle_clocks.sm_mhz) * (step_end - idle_from) * 1e-9;
  r.step_time_ns = step_end;
  // The gap after the step's last end runs to the next step's first op (its head, op 0's start, repeats).
  r.gap_tail_j = tails ? gap_tails_j(spans, fall_w, step_end + spans.start_ns[0], m) : 0;
  r.energy_j = dynamic_j + idle_j + r.gap_tail_j;
  r.average_power_w = r.energy_j / (step_end * 1e-9);
  // What the next step inherits: the clocks of the last op started, and every change that had not landed by
  // then (it lands for the next step's ops, at its first op start at the earliest).
  out.next.in_effect = idle_clocks;
  for (std::size_t k = landed + 1; k < changes.size(); ++k)
    out.next.pending.push_back({changes[k].at_ns - step_end, changes[k].clocks});
  out.next.last_land_ns = last_land - step_end;
  return out;
}

// The dependency-driven replay (step_graph.hpp) under the schedule's clock changes.
SimResult run_dependency(const model::Workload& w, const graph::StepGraph& g, const model::DvfsModel& m,
                         const plan::Schedule& s, double latency_ns, bool keep_timeline,
                         const std::vector<double>* floor) {
  const std::size_t n = w.ops.size();
  std::vector<Change> changes{{kNever, s.clocks[n - 1]}};
  model::ClockPair last_requested = s.clocks[n - 1];
  double last_land = kNever;
  struct PerStep {
    double dynamic_j = 0, busy_ns = 0;
    std::size_t changes = 0, late = 0;
  };
  std::vector<PerStep> per(graph::kMaxReplaySteps);
  std::vector<TimelineEntry> tl[2];
  if (keep_timeline) tl[0].resize(n), tl[1].resize(n);
  const bool tails = m.params().gap_decay_ns > 0;
  BusySpans spans[2];  // the last two steps' ops (the measured one is one of them)
  if (tails) spans[0].resize(n), spans[1].resize(n);
  // The clocks at a position repeat from step to step once the replay settles: one prediction per position.
  std::vector<model::ClockPair> cached_clocks(n, model::ClockPair{-1, -1});
  std::vector<model::Prediction> cached(n);
  double step_origin = 0;  // this step's first position's start
  auto duration = [&](std::size_t k, std::size_t i, double start) {
    PerStep& ps = per[k];
    if (i == 0) step_origin = start;
    if (!(s.clocks[i] == last_requested)) {
      const double land = std::max(start, last_land + latency_ns);  // issued L before, one change in flight
      if (land > start) ++ps.late;
      changes.push_back({land, s.clocks[i]});
      last_land = land;
      last_requested = s.clocks[i];
      ++ps.changes;
    }
    // Landing times rise with issue order: the last one landed by `start` is in effect.
    auto it = std::upper_bound(changes.begin(), changes.end(), start,
                               [](double v, const Change& c) { return v < c.at_ns; });
    const model::ClockPair c = std::prev(it)->clocks;
    if (!(cached_clocks[i] == c)) {
      cached[i] = model::predict_op(m, w.ops[i], c);
      cached_clocks[i] = c;
    }
    const model::Prediction& p = cached[i];
    double d = p.time_ns;
    if (floor) d = std::max(d, step_origin + (*floor)[i] - start);
    ps.dynamic_j += (p.power_w - p.idle_power_w) * d * 1e-9;
    ps.busy_ns += d;
    if (tails) spans[k % 2].set(i, start, start + d);
    if (keep_timeline) tl[k % 2][i] = {i, start, start + d, c, p.effective_sm_mhz, p.power_w};
    return d;
  };
  graph::StepTiming t = graph::replay_steps(g, duration);
  const PerStep& ps = per[t.measured];
  // The board's idle power over [origin, origin + step] at the clocks in effect.
  const double from = t.origin_ns, to = t.origin_ns + t.step_ns;
  auto it = std::upper_bound(changes.begin(), changes.end(), from, [](double v, const Change& c) { return v < c.at_ns; });
  std::size_t k = static_cast<std::size_t>(it - changes.begin()) - 1;
  double idle_j = 0, at = from;
  for (;;) {
    const double next = k + 1 < changes.size() ? std::min(to, changes[k + 1].at_ns) : to;
    if (next > at) idle_j += m.idle_power_w(changes[k].clocks.sm_mhz) * (next - at) * 1e-9, at = next;
    if (at >= to || k + 1 >= changes.size()) break;
    ++k;
  }
  SimResult r;
  r.dependency_replay = true;
  r.step_time_ns = t.step_ns;
  if (tails) {
    // fall_from_w, taking the predictions already made at the default clocks (all of them for a baseline).
    const model::ClockPair def{m.spec().default_sm_clock_mhz, m.spec().default_mem_clock_mhz};
    std::vector<double> fall_w(n);
    for (std::size_t i = 0; i < n; ++i) {
      const model::Prediction p = cached_clocks[i] == def ? cached[i] : model::predict_op(m, w.ops[i], def);
      fall_w[i] = p.power_w - p.idle_power_w;
    }
    r.gap_tail_j = gap_tails_j(spans[t.measured % 2], fall_w, to, m);
  }
  r.energy_j = ps.dynamic_j + idle_j + r.gap_tail_j;
  r.average_power_w = r.energy_j / (t.step_ns * 1e-9);
  r.clock_changes = ps.changes;
  r.late_changes = ps.late;
  r.busy_time_ns = ps.busy_ns;
  if (keep_timeline) {
    r.timeline = std::move(tl[t.measured % 2]);
    for (auto& e : r.timeline) e.start_ns -= t.origin_ns, e.end_ns -= t.origin_ns;
    r.slack_ns = graph::free_float_ns(g, t);
  }
  return r;
}

// A hash of every field build_step_graph reads, word by word (a byte-wise hash cost as much as a fallback replay).
std::uint64_t graph_fingerprint(const model::Workload& w) {
  std::uint64_t h = 1469598103934665603ull;
  auto word = [&](std::uint64_t v) { h = (h ^ v) * 1099511628211ull, h ^= h >> 29; };
  auto num = [&](double v) {
    std::uint64_t u;
    std::memcpy(&u, &v, sizeof u);
    word(u);
  };
  word(w.ops.size()), num(w.period_ns), word(w.syncs.size()), num(w.cpu_time_scale), num(w.cpu_less_per_event_ns);
  for (const auto& o : w.ops) {
    num(o.start_offset_ns), num(o.ref_time_ns), num(o.launch_offset_ns);
    word(static_cast<std::uint64_t>(static_cast<std::uint32_t>(o.stream)) << 16 |
         static_cast<std::uint64_t>(o.launch_known) << 8 | static_cast<std::uint64_t>(o.kind));
  }
  for (const auto& y : w.syncs) {
    num(y.enter_offset_ns), num(y.duration_ns);
    word(static_cast<std::uint64_t>(static_cast<std::uint32_t>(y.stream)) << 8 | static_cast<std::uint64_t>(y.scope));
  }
  word(std::hash<std::string>{}(w.cpu_note));
  return h;
}

}  // namespace

SimResult simulate(const model::Workload& w, const model::DvfsModel& m, const plan::Schedule& s, double latency_ns,
                   bool keep_timeline) {
  if (s.clocks.size() != w.ops.size())
    throw std::invalid_argument("simulate: the schedule has " + std::to_string(s.clocks.size()) +
                                " positions, the template " + std::to_string(w.ops.size()));
  // Planning simulates one template hundreds of times: its graph is kept while everything it is built from is
  // the same (a fingerprint of those fields; per thread, one template).
  thread_local std::uint64_t key = 0;
  thread_local graph::StepGraph graph;
  const std::uint64_t k = graph_fingerprint(w);
  if (k != key || graph.stream.size() != (graph.dependency ? w.ops.size() : 0)) graph = graph::build_step_graph(w), key = k;
  return simulate(w, graph, m, s, latency_ns, keep_timeline);
}

SimResult simulate(const model::Workload& w, const graph::StepGraph& g, const model::DvfsModel& m, const plan::Schedule& s,
                   double latency_ns, bool keep_timeline, const std::vector<double>* end_floor_ns) {
  if (s.clocks.size() != w.ops.size())
    throw std::invalid_argument("simulate: the schedule has " + std::to_string(s.clocks.size()) +
                                " positions, the template " + std::to_string(w.ops.size()));
  const std::size_t n = w.ops.size();
  if (n == 0) return SimResult{};
  if (end_floor_ns && end_floor_ns->size() != n)
    throw std::invalid_argument("simulate: end floors for " + std::to_string(end_floor_ns->size()) + " positions, the template has " + std::to_string(n));
  if (g.dependency && g.stream.size() != n)
    throw std::invalid_argument("simulate: the step graph has " + std::to_string(g.stream.size()) + " positions, the template " + std::to_string(n));
  if (g.dependency) return run_dependency(w, g, m, s, latency_ns, keep_timeline, end_floor_ns);
  if (end_floor_ns) throw std::invalid_argument("simulate: end floors need the dependency-driven replay (launch events)");
  // First assume the previous step ended on the last position's clocks with every change landed; replay once
  // more from the state this step ends in when that was not so (a change late at the step's end, or the
  // previous step's last change landing too close to this step's first).
  Carry assumed{s.clocks[n - 1], {}, kNever};
  StepOut first = run_step(w, m, s, latency_ns, assumed, keep_timeline);
  const Carry& c = first.next;
  const bool steady = c.in_effect == assumed.in_effect && c.pending.empty() &&
                      (first.r.clock_changes == 0 || c.last_land_ns + latency_ns <= first.first_change_start_ns);
  if (steady) return std::move(first.r);
  return std::move(run_step(w, m, s, latency_ns, c, keep_timeline).r);
}

}  // namespace gearshift::sim
