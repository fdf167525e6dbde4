#include "plan/clock_table.hpp"

#include "graph/board_gaps.hpp"
#include "graph/step_graph.hpp"
#include "trace/graph_units.hpp"

#include <algorithm>
#include <stdexcept>
#include <string>
#include <utility>

namespace gearshift::plan {

std::vector<double> op_starts_ns(const model::Workload& w, const std::vector<double>& dur, double* step_ns) {
  std::vector<double> start(w.ops.size());
  std::vector<std::pair<std::int32_t, double>> free;  // stream -> time it is free
  double prev = 0, end = 0;
  for (std::size_t i = 0; i < w.ops.size(); ++i) {
    const auto& op = w.ops[i];
    auto f = std::find_if(free.begin(), free.end(), [&](const auto& e) { return e.first == op.stream; });
    if (f == free.end()) f = free.insert(free.end(), {op.stream, 0.0});
    start[i] = prev = std::max(f->second + op.gap_before_ns, prev);
    f->second = start[i] + dur[i];
    end = std::max(end, f->second);
  }
  if (step_ns) *step_ns = end + w.tail_ns;
  return start;
}

namespace {

// What each op may overrun at no step-time cost: its free float, shared along a chain of ops on one stream of
// which each but the last has none and waits for nothing else to wait on it (each starts as its predecessor
// ends), the last one's float split by default time. The chain's overruns add up at its last op's end, within
// that op's float, and reach nothing else; so every allowance can be used at once.
std::vector<double> float_allowance(const graph::StepGraph& g, const std::vector<double>& f,
                                    const std::vector<double>& def_time) {
  const std::size_t n = f.size();
  std::vector<std::uint8_t> watched(n, 0);  // an op or synchronize besides its stream successor waits on it
  for (std::size_t i = 0; i < n; ++i)
    if (g.wait_on[i] >= 0) watched[static_cast<std::size_t>(g.wait_on[i])] = 1;
  for (const auto& y : g.syncs)
    for (const auto& a : y.awaited) watched[a.position] = 1;
  std::vector<double> out = f;
  std::vector<std::uint8_t> seen(n, 0);
  for (std::size_t first = 0; first < n; ++first) {
    if (seen[first]) continue;
    std::vector<std::size_t> chain;
    double sum = 0;
    for (std::int32_t i = static_cast<std::int32_t>(first); i >= 0 && !seen[static_cast<std::size_t>(i)];
         i = g.stream_next[static_cast<std::size_t>(i)]) {
      const auto u = static_cast<std::size_t>(i);
      seen[u] = 1;
      chain.push_back(u);
      sum += def_time[u];
      if (f[u] > 0.5) {  // the chain ends here: its float is shared
        if (sum > 0)
          for (std::size_t q : chain) out[q] = f[u] * def_time[q] / sum;
        chain.clear(), sum = 0;
      } else if (watched[u]) {
        chain.clear(), sum = 0;  // its own end matters: no share
      }
    }
  }
  return out;
}

// The slack-aware costs on the dependency graph (graph/step_graph.hpp). An op's allowance (its free float, or its
// share of a chain's) is time it may take at no cost: the step grows by at most the sum of the ops' overruns
// beyond their allowances (every allowance can be used at once), so an op's budget cost is its default time plus
// its overrun beyond its allowance. The board idles at the
// op's clocks from its start to the next op's start: the baseline interval, longer by the overrun when the
// next op is its stream successor (shorter with a faster op only when it has no float: its successor then
// waits for it).
void dependency_costs(ClockTable& t, const graph::StepGraph& g, const std::vector<double>& def_time,
                      const std::vector<double>& fast_time, const std::vector<double>& dynamic_j,
                      const std::vector<double>& idle_w) {
  const std::size_t n = t.ops, nc = t.clocks.size();
  t.single_stream = false;  // the sums bound the simulator's step time, they are not it
  const graph::StepTiming base = graph::replay_fixed(g, def_time);
  const graph::StepTiming fast = graph::replay_fixed(g, fast_time);
  t.step_ns = base.step_ns;
  t.fastest_step_ns = fast.step_ns;
  t.start_ns.resize(n);
  t.fastest_start_ns.resize(n);
  for (std::size_t i = 0; i < n; ++i) {
    t.start_ns[i] = base.start_ns[i] - base.origin_ns;
    t.fastest_start_ns[i] = fast.start_ns[i] - fast.origin_ns;
  }
  t.slack_ns = graph::free_float_ns(g, base);
  const std::vector<double> allowance = float_allowance(g, t.slack_ns, def_time);
  t.budget_ns.resize(n * nc);
  for (std::size_t i = 0; i < n; ++i) {
    const bool last = i + 1 == n;
    const double interval = last ? t.step_ns - t.start_ns[i] : t.start_ns[i + 1] - t.start_ns[i];
    const bool own = g.stream_next[i] == (last ? -1 : static_cast<std::int32_t>(i + 1));
    const double f = t.slack_ns[i];
    for (std::size_t c = 0; c < nc; ++c) {
      const double over = t.time(i, c) - def_time[i];
      t.budget_ns[i * nc + c] = def_time[i] + std::max(0.0, over - allowance[i]);
      const double beyond = std::max(0.0, over - f);
      const double extra = !own ? 0.0 : f > 0.5 ? beyond : over;
      t.energy_j[i * nc + c] = dynamic_j[i * nc + c] + idle_w[c] * (interval + extra) * 1e-9;
    }
  }
}

// Each op's share of the board's fall to idle in the gap after it (model::DvfsModel::gap_tail_ns), at the
// baseline's timing: J added to energy(i, c) = its power above idle at the default clocks × the fall's length,
// the same at every c (the simulator's rule: the fall was measured at the default clocks only). Exact on one
// stream, where the gap after an op is the next op's launch gap whatever the clocks; elsewhere the baseline's gaps.
void add_gap_tails(ClockTable& t, const model::DvfsModel& m, const std::vector<double>& def_time,
                   const std::vector<double>& dynamic_j, double next_start_ns) {
  if (!(m.params().gap_decay_ns > 0)) return;
  const std::size_t n = t.ops, nc = t.clocks.size();
  std::vector<double> end(n);
  for (std::size_t i = 0; i < n; ++i) end[i] = t.start_ns[i] + def_time[i];
  const std::vector<double> gap = graph::board_gaps_after_ns(t.start_ns, end, next_start_ns);
  for (std::size_t i = 0; i < n; ++i) {
    const double fall_ns = m.gap_tail_ns(gap[i]);
    if (fall_ns <= 0) continue;
    const double time = t.time(i, t.default_index);
    const double fall_j = time > 0 ? std::max(0.0, dynamic_j[i * nc + t.default_index] / time) * fall_ns : 0.0;
    for (std::size_t c = 0; c < nc; ++c) t.energy_j[i * nc + c] += fall_j;
  }
}

}  // namespace

ClockTable build_clock_table(const model::Workload& w, const model::DvfsModel& m, int min_sm_mhz,
                             const graph::StepGraph* graph) {
  ClockTable t;
  const auto& spec = m.spec();
  for (int mem : spec.mem_clocks_mhz)
    for (int sm : spec.sm_clocks_mhz)
      if (sm >= min_sm_mhz) t.clocks.push_back({sm, mem});
  const model::ClockPair def{spec.default_sm_clock_mhz, spec.default_mem_clock_mhz};
  auto it = std::find(t.clocks.begin(), t.clocks.end(), def);
  t.default_index = it == t.clocks.end() ? t.clocks.size() - 1 : static_cast<std::size_t>(it - t.clocks.begin());
  t.ops = w.ops.size();
  {
    std::vector<std::int64_t> launches;
    for (const auto& op : w.ops) launches.push_back(op.graph_launch);
    for (bool b : trace::unit_starts(launches)) t.may_change.push_back(b ? 1 : 0);
  }
  const std::size_t n = t.ops, nc = t.clocks.size();
  t.time_ns.resize(n * nc);
  t.energy_j.resize(n * nc);
  std::vector<double> dynamic_j(n * nc);
  for (std::size_t i = 0; i < n; ++i) {
    const auto& op = w.ops[i];
    for (std::size_t c = 0; c < nc; ++c) {
      auto p = model::predict_op(m, op, t.clocks[c]);
      t.time_ns[i * nc + c] = p.time_ns;
      dynamic_j[i * nc + c] = (p.power_w - p.idle_power_w) * p.time_ns * 1e-9;
    }
  }
  if (n == 0) return t;
  std::vector<double> def_time(n), fast_time(n);
  for (std::size_t i = 0; i < n; ++i) {
    def_time[i] = t.time(i, t.default_index);
    fast_time[i] = *std::min_element(t.time_ns.begin() + static_cast<std::ptrdiff_t>(i * nc),
                                     t.time_ns.begin() + static_cast<std::ptrdiff_t>((i + 1) * nc));
    t.single_stream = t.single_stream && w.ops[i].stream == w.ops[0].stream;
  }
  std::vector<double> idle_w(nc);
  for (std::size_t c = 0; c < nc; ++c) idle_w[c] = m.idle_power_w(t.clocks[c].sm_mhz);
  const graph::StepGraph own = graph ? graph::StepGraph{} : graph::build_step_graph(w);
  const graph::StepGraph& g = graph ? *graph : own;
  if (g.dependency && g.stream.size() != n)
    throw std::invalid_argument("build_clock_table: the step graph has " + std::to_string(g.stream.size()) +
                                " positions, the template " + std::to_string(n));
  if (g.dependency) {
    dependency_costs(t, g, def_time, fast_time, dynamic_j, idle_w);
    add_gap_tails(t, m, def_time, dynamic_j, t.step_ns);
    return t;
  }
  t.budget_ns = t.time_ns;
  if (!t.single_stream)
    for (std::size_t i = 0; i < n; ++i)
      for (std::size_t c = 0; c < nc; ++c) t.budget_ns[i * nc + c] = std::max(t.time(i, c), def_time[i]);
  t.start_ns = op_starts_ns(w, def_time, &t.step_ns);
  t.fastest_start_ns = op_starts_ns(w, fast_time, &t.fastest_step_ns);
  // The board idles at op i's clocks from its start to op i+1's start (the last op: to the step's end and on
  // to the first op's start, the next step's head). That interval is op i's own time plus a clock-independent
  // rest when op i's end decides it (the next op waits on op i's stream, or op i ends the step), else the
  // baseline interval.
  double last_end = 0;
  std::size_t last_ender = 0;
  for (std::size_t i = 0; i < n; ++i)
    if (t.start_ns[i] + def_time[i] >= last_end) last_end = t.start_ns[i] + def_time[i], last_ender = i;
  for (std::size_t i = 0; i < n; ++i) {
    bool own_time = false;
    double rest = 0;
    if (i + 1 < n) {
      own_time = w.ops[i + 1].stream == w.ops[i].stream;
      rest = own_time ? w.ops[i + 1].gap_before_ns : t.start_ns[i + 1] - t.start_ns[i];
    } else {
      own_time = last_ender == i;
      const double to_end = own_time ? w.tail_ns : t.step_ns - t.start_ns[i];
      rest = to_end + t.start_ns[0];
    }
    for (std::size_t c = 0; c < nc; ++c) {
      const double interval_ns = rest + (own_time ? t.time(i, c) : 0.0);
      t.energy_j[i * nc + c] = dynamic_j[i * nc + c] + idle_w[c] * interval_ns * 1e-9;
    }
  }
  add_gap_tails(t, m, def_time, dynamic_j, t.step_ns + t.start_ns[0]);
  return t;
}

}  // namespace gearshift::plan
