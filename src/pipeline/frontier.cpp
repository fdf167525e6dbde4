#include "pipeline/frontier.hpp"

#include <algorithm>
#include <cmath>

#include "pipeline/error.hpp"
#include "pipeline/min_cut.hpp"
#include "pipeline/warm_flow.hpp"

namespace gearshift::pipeline {

namespace {

constexpr double kMicro = 1e6;  // capacities in µJ

struct Csr {
  std::vector<int> start, adj;
};

Csr make_csr(int n, const std::vector<std::pair<int, int>>& edges, bool forward) {
  Csr c;
  c.start.assign(static_cast<std::size_t>(n) + 1, 0);
  for (auto [u, v] : edges) ++c.start[static_cast<std::size_t>(forward ? u : v) + 1];
  for (int i = 0; i < n; ++i) c.start[i + 1] += c.start[i];
  c.adj.resize(edges.size());
  std::vector<int> pos(c.start.begin(), c.start.end() - 1);
  for (auto [u, v] : edges) c.adj[pos[forward ? u : v]++] = forward ? v : u;
  return c;
}

// Earliest/latest schedule of a DAG, reused every step. Kept as earliest finish ef = es + d and latest start
// ls = lf − d, so that each pass reads one value per neighbour (the passes run once per frontier step).
struct Cpm {
  int n = 0;
  Csr succ, pred;
  std::vector<int> topo;
  std::vector<long> es, ef, ls;

  // topological_labels: the operations are numbered in a topological order, which becomes `topo`.
  explicit Cpm(const FrontierInput& in, bool topological_labels = false) : n(in.num_ops) {
    for (auto [u, v] : in.edges)
      if (u < 0 || v < 0 || u >= n || v >= n || u == v) throw PipelineError("frontier: edge out of range");
    succ = make_csr(n, in.edges, true);
    pred = make_csr(n, in.edges, false);
    std::vector<int> indeg(n);
    for (int v = 0; v < n; ++v) indeg[v] = pred.start[v + 1] - pred.start[v];
    if (topological_labels) {
      for (int v = 0; v < n; ++v) topo.push_back(v);
      es.resize(n);
      ef.resize(n);
      ls.resize(n);
      return;
    }
    for (int v = 0; v < n; ++v)
      if (!indeg[v]) topo.push_back(v);
    for (std::size_t k = 0; k < topo.size(); ++k)
      for (int e = succ.start[topo[k]]; e < succ.start[topo[k] + 1]; ++e)
        if (--indeg[succ.adj[e]] == 0) topo.push_back(succ.adj[e]);
    if (static_cast<int>(topo.size()) != n) throw PipelineError("frontier: the instruction graph has a cycle");
    es.resize(n);
    ef.resize(n);
    ls.resize(n);
  }

  long run(const std::vector<int>& d) {
    long T = 0;
    for (int v : topo) {
      long s = 0;
      for (int e = pred.start[v]; e < pred.start[v + 1]; ++e) s = std::max(s, ef[pred.adj[e]]);
      es[v] = s;
      ef[v] = s + d[v];
      T = std::max(T, ef[v]);
    }
    for (auto it = topo.rbegin(); it != topo.rend(); ++it) {
      int v = *it;
      long f = T;
      for (int e = succ.start[v]; e < succ.start[v + 1]; ++e) f = std::min(f, ls[succ.adj[e]]);
      ls[v] = f - d[v];
    }
    return T;
  }
  bool critical(int v) const { return ls[v] == es[v]; }
  long lf(int v) const { return ef[v] - es[v] + ls[v]; }  // ls + d
};

std::int64_t micro(double j) { return static_cast<std::int64_t>(std::floor(j * kMicro)); }

}  // namespace

std::vector<int> Frontier::durations_at(std::size_t point) const {
  std::vector<int> d = initial;
  for (std::size_t k = 0; k < point && k < changes.size(); ++k)
    for (auto [op, delta] : changes[k]) d[op] += delta;
  return d;
}

int makespan(const FrontierInput& in, const std::vector<int>& durations) {
  Cpm cpm(in);
  return static_cast<int>(cpm.run(durations));
}

namespace {

// The solver, on operations numbered in a topological order (see compute_frontier); label[i] is the number of
// the caller's operation i, whose order the initial energy sum keeps.
Frontier frontier_in_topological_labels(const FrontierInput& in, const std::vector<int>& label) {
  const int n = in.num_ops;
  Cpm cpm(in, true);
  Frontier fr;
  fr.unit_s = in.unit_s;
  fr.gpus = in.gpus;
  fr.blocking_power_w = in.blocking_power_w;
  std::vector<int> d(n);
  for (int i = 0; i < n; ++i) d[i] = in.costs[i].q_max();
  fr.initial = d;
  // Σ f_i(d_i) is updated by the few changed operations of each step (drift ~1e-12 relative over 10^4 steps).
  double compute = 0;
  for (int i : label) compute += in.costs[i].at(d[i]);
  auto record = [&](long T) {
    fr.points.push_back({static_cast<int>(T), compute,
                         compute + in.gpus * static_cast<double>(T) * in.unit_s * in.blocking_power_w});
  };
  long T = cpm.run(d);
  record(T);
  // Per-operation cut terms in µJ, recomputed only when the duration changes: speed-up cost
  // up = f(d−1) − f(d) (+1 µJ strictly inside the range; ∞ at q_min) and slow-down refund r = f(d) − f(d+1).
  std::vector<std::int64_t> op_up(n), op_refund(n);
  auto terms = [&](int v) {
    const auto& c = in.costs[v];
    const bool can_fast = d[v] > c.q_min, can_slow = d[v] < c.q_max();
    op_refund[v] = can_slow ? micro(c.at(d[v]) - c.at(d[v] + 1)) : 0;
    op_up[v] = can_fast ? micro(c.at(d[v] - 1) - c.at(d[v])) + (can_slow ? 1 : 0) : MinCut::kInfinity;
  };
  for (int v = 0; v < n; ++v) terms(v);

  MinCut boost_cut;
  WarmFlow warm;
  const bool use_boost = in.engine == CutEngine::kBoostBk;
  const int E = static_cast<int>(in.edges.size());
  std::vector<int> node_of(n, -1);  // op -> its start node (Boost: critical ops only); end node = start + 1
  std::vector<int> crit;
  std::vector<std::int64_t> unary;
  // Warm engine: one network over every operation, built once, its nodes numbered in topological order
  // (start 2 + 2k, end 3 + 2k for the k-th operation of cpm.topo). Each step only sets capacities: an arc
  // outside this step's critical network gets 0, which leaves it out of the cut and drops its flow.
  // Per operation: the operation arc start→end, source→end and start→sink (the refund's node terms), and
  // entry source→start / exit end→sink where the operation can start at 0 / end at T; one arc per precedence
  // edge end(u)→start(w).
  struct OpArcs {
    int op = -1, usrc = -1, usnk = -1, entry = -1, exit = -1;
  };
  std::vector<OpArcs> op_arcs;
  std::vector<int> edge_arc;
  if (!use_boost) {
    for (int k = 0; k < n; ++k) node_of[cpm.topo[k]] = 2 + 2 * k;
    // With every duration ≥ 1 only an operation without predecessors starts at 0 and only one without
    // successors ends at T; zero durations allow more, so then every operation gets both arcs.
    bool zero_duration = false;
    for (const auto& c : in.costs) zero_duration |= c.q_min <= 0;
    warm.reset(2 + 2 * n, 0, 1);
    op_arcs.resize(n);
    for (int v = 0; v < n; ++v) {
      const int s = node_of[v], e = s + 1;
      auto& a = op_arcs[v];
      a.op = warm.add_arc(s, e);
      a.usrc = warm.add_arc(0, e);
      a.usnk = warm.add_arc(s, 1);
      if (zero_duration || cpm.pred.start[v] == cpm.pred.start[v + 1]) a.entry = warm.add_arc(0, s);
      if (zero_duration || cpm.succ.start[v] == cpm.succ.start[v + 1]) a.exit = warm.add_arc(e, 1);
    }
    edge_arc.resize(static_cast<std::size_t>(E));
    for (int k = 0; k < E; ++k) edge_arc[k] = warm.add_arc(node_of[in.edges[k].first] + 1, node_of[in.edges[k].second]);
  }
  static_assert(MinCut::kInfinity == WarmFlow::kInfinity, "one infinity for both cut engines");
  std::vector<char> is_crit(n);
  // What the warm network was last given: per operation its state bits (kUnset before the first step) and
  // whether its cut terms changed since; per precedence edge whether it was tight.
  constexpr char kUnset = -1;
  std::vector<char> op_state(static_cast<std::size_t>(n), kUnset), terms_changed(static_cast<std::size_t>(n), 0);
  std::vector<char> edge_tight(static_cast<std::size_t>(E), 0);
  // Crossing an operation forward costs up, backward refunds `refund`: an arc of capacity up − refund plus
  // node terms of `refund`.
  auto op_cap = [&](int v) {
    const std::int64_t refund = op_refund[v], up = op_up[v];
    return up == MinCut::kInfinity ? up : std::max<std::int64_t>(0, up - refund);
  };
  // A precedence edge belongs to the critical network when both ends are critical and it has no slack.
  auto tight = [&](int u, int w) { return is_crit[u] && is_crit[w] && cpm.ef[u] == cpm.es[w]; };
  // The warm network is given only capacities that changed (the rest keeps its flow).
  auto set = [&](int arc, std::int64_t cap) {
    if (arc >= 0 && warm.capacity(arc) != cap) warm.set_capacity(arc, cap);
  };
  while (true) {
    crit.clear();
    for (int v : cpm.topo) {
      is_crit[v] = cpm.critical(v);
      if (is_crit[v]) crit.push_back(v);
    }
    std::int64_t value = 0;
    if (use_boost) {
      const int source = 0, sink = 1;
      int nodes = 2;
      for (int v : crit) {
        node_of[v] = nodes;
        nodes += 2;
      }
      boost_cut.reset(nodes, source, sink);
      unary.assign(static_cast<std::size_t>(nodes), 0);
      for (int v : crit) {
        const int s = node_of[v], e = s + 1;
        boost_cut.add_edge(s, e, op_cap(v));
        unary[e] += op_refund[v];
        unary[s] -= op_refund[v];
        if (cpm.es[v] == 0) boost_cut.add_edge(source, s, MinCut::kInfinity);
        if (cpm.lf(v) == T) boost_cut.add_edge(e, sink, MinCut::kInfinity);
        for (int k = cpm.succ.start[v]; k < cpm.succ.start[v + 1]; ++k) {
          int w = cpm.succ.adj[k];
          if (tight(v, w)) boost_cut.add_edge(e, node_of[w], MinCut::kInfinity);
        }
      }
      for (int v : crit) {
        for (int x : {node_of[v], node_of[v] + 1}) {
          if (unary[x] > 0) boost_cut.add_edge(source, x, unary[x]);
          else if (unary[x] < 0) boost_cut.add_edge(x, sink, -unary[x]);
        }
      }
      value = boost_cut.solve();
    } else {
      // The same network as the Boost branch builds, as capacities; an operation off the critical network
      // gets 0 on all its arcs.
      // An operation's capacities depend only on its state (critical, starts at 0, ends at T) and its cut
      // terms, so operations whose state and terms did not change since the last step are skipped.
      for (int v = 0; v < n; ++v) {
        const bool c = is_crit[v];
        const bool entry = c && cpm.es[v] == 0, exit = c && cpm.lf(v) == T;
        const char state = static_cast<char>((c ? 1 : 0) | (entry ? 2 : 0) | (exit ? 4 : 0));
        if (state == op_state[v] && !terms_changed[v]) continue;
        op_state[v] = state;
        terms_changed[v] = 0;
        const auto& a = op_arcs[v];
        set(a.op, c ? op_cap(v) : 0);
        set(a.usrc, c ? op_refund[v] : 0);
        set(a.usnk, c ? op_refund[v] : 0);
        set(a.entry, entry ? WarmFlow::kInfinity : 0);
        set(a.exit, exit ? WarmFlow::kInfinity : 0);
      }
      for (int k = 0; k < E; ++k) {
        const char t = tight(in.edges[k].first, in.edges[k].second) ? 1 : 0;
        if (t == edge_tight[k]) continue;
        edge_tight[k] = t;
        set(edge_arc[k], t ? WarmFlow::kInfinity : 0);
      }
      value = warm.solve();
    }
    if (value >= MinCut::kInfinity) break;  // some critical path is all at q_min: T_min reached
    auto in_source_side = [&](int node) {
      return use_boost ? boost_cut.source_side()[node] != 0 : warm.in_source_side(node);
    };
    std::vector<std::pair<int, int>> delta;
    for (int v : crit) {
      const bool s_in = in_source_side(node_of[v]), e_in = in_source_side(node_of[v] + 1);
      if (s_in && !e_in) delta.emplace_back(v, -1);
      else if (!s_in && e_in && d[v] < in.costs[v].q_max()) delta.emplace_back(v, +1);
    }
    for (auto [v, dd] : delta) {
      compute += in.costs[v].at(d[v] + dd) - in.costs[v].at(d[v]);
      d[v] += dd;
    }
    long T2 = cpm.run(d);
    if (T2 >= T) {  // no progress (not seen on any input); undo and stop rather than loop
      for (auto [v, dd] : delta) {
        d[v] -= dd;
        compute -= in.costs[v].at(d[v] + dd) - in.costs[v].at(d[v]);
      }
      cpm.run(d);
      break;
    }
    T = T2;
    for (auto [v, dd] : delta) {
      terms(v);
      terms_changed[v] = 1;
    }
    fr.changes.push_back(std::move(delta));
    record(T);
  }
  return fr;
}

}  // namespace

// Every step passes over all operations and edges (critical path, changed states, cut), so the operations are
// first renumbered in the critical-path code's topological order: the passes then walk their arrays in order.
// Each step visits the critical operations in that same order as before the renumbering, and the initial energy
// sum runs in the caller's order, so the changes and the energy sums are the same, in the same order (the
// outputs are byte-identical); the answers are mapped back to the caller's numbering.
Frontier compute_frontier(const FrontierInput& in) {
  if (static_cast<int>(in.costs.size()) != in.num_ops) throw PipelineError("frontier: one cost table per operation");
  for (const auto& c : in.costs)
    if (c.cost.empty()) throw PipelineError("frontier: empty cost table");
  const int n = in.num_ops;
  const std::vector<int> order = Cpm(in).topo;  // order[label] = operation; checks the edges and for cycles
  std::vector<int> label(static_cast<std::size_t>(n));
  for (int k = 0; k < n; ++k) label[order[k]] = k;
  FrontierInput r;
  r.num_ops = n;
  r.gpus = in.gpus;
  r.unit_s = in.unit_s;
  r.blocking_power_w = in.blocking_power_w;
  r.engine = in.engine;
  r.edges.reserve(in.edges.size());
  for (auto [u, w] : in.edges) r.edges.emplace_back(label[u], label[w]);
  r.costs.reserve(in.costs.size());
  for (int k = 0; k < n; ++k) r.costs.push_back(in.costs[order[k]]);
  Frontier fr = frontier_in_topological_labels(r, label);
  std::vector<int> initial(static_cast<std::size_t>(n));
  for (int k = 0; k < n; ++k) initial[order[k]] = fr.initial[k];
  fr.initial = std::move(initial);
  for (auto& step : fr.changes)
    for (auto& [op, delta] : step) op = order[op];
  return fr;
}

}  // namespace gearshift::pipeline
