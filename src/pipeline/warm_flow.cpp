#include "pipeline/warm_flow.hpp"

#include <algorithm>
#include <cassert>
#include <functional>

namespace gearshift::pipeline {

namespace {
constexpr int kNone = -1;  // no tree arc: a free node or an orphan; no scan position
constexpr int kRoot = -2;  // the tree arc of the source and of the sink
}  // namespace

void WarmFlow::reset(int n, int source, int sink) {
  n_ = n;
  s_ = source;
  t_ = sink;
  built_ = false;
  from_.clear();
  to_.clear();
  cap_.clear();
}

int WarmFlow::add_arc(int u, int v) {
  assert(!built_);
  from_.push_back(u);
  to_.push_back(v);
  cap_.push_back(0);
  return static_cast<int>(from_.size()) - 1;
}

// Lays the residual arcs out by tail node, all at zero flow and zero capacity.
void WarmFlow::build() {
  const auto arcs = static_cast<int>(from_.size());
  const auto n = static_cast<std::size_t>(n_);
  first_.assign(n + 1, 0);
  for (int a = 0; a < arcs; ++a) {
    ++first_[from_[a] + 1];
    ++first_[to_[a] + 1];
  }
  for (int v = 0; v < n_; ++v) first_[v + 1] += first_[v];
  std::vector<int> next(first_.begin(), first_.end() - 1);  // next free residual slot per node
  const auto residual = static_cast<std::size_t>(2 * arcs);
  cto_.resize(residual);
  crev_.resize(residual);
  cfwd_.resize(residual);
  cres_.assign(residual, 0);
  fwd_pos_.resize(static_cast<std::size_t>(arcs));
  for (int a = 0; a < arcs; ++a) {
    const int f = next[from_[a]]++, r = next[to_[a]]++;
    cto_[f] = to_[a];
    cto_[r] = from_[a];
    crev_[f] = r;
    crev_[r] = f;
    cfwd_[f] = 1;
    cfwd_[r] = 0;
    fwd_pos_[a] = f;
  }
  imbalance_.assign(n, 0);
  value_ = 0;
  deficit_.clear();
  excess_.clear();
  side_.assign(n, 0);
  // Empty trees: only the source and the sink, both to be grown.
  tree_.assign(n, kFree);
  parent_.assign(n, kNone);
  parent_node_.assign(n, kNone);
  ts_.assign(n, 0);
  dist_.assign(n, 0);
  time_ = 1;
  tree_[static_cast<std::size_t>(s_)] = kSourceTree;
  tree_[static_cast<std::size_t>(t_)] = kSinkTree;
  parent_[static_cast<std::size_t>(s_)] = parent_[static_cast<std::size_t>(t_)] = kRoot;
  active_.clear();
  queued_.assign(n, 0);
  orphans_.clear();
  touched_.clear();
  activate(s_);
  activate(t_);
  built_ = true;
}

void WarmFlow::set_capacity(int arc, std::int64_t capacity) {
  if (!built_) build();
  cap_[static_cast<std::size_t>(arc)] = capacity;
  const int k = fwd_pos_[static_cast<std::size_t>(arc)], r = crev_[k];
  const std::int64_t f = cres_[r];
  touched_.push_back(k);
  if (f <= capacity) {
    cres_[k] = capacity - f;
    return;
  }
  // The tail now sends less than it receives (excess), the head receives less than it sends (deficit).
  cres_[k] = 0;
  cres_[r] = capacity;
  const std::int64_t by = f - capacity;
  const int u = from_[static_cast<std::size_t>(arc)], v = to_[static_cast<std::size_t>(arc)];
  if (u == s_) value_ -= by;
  if (v == s_) value_ += by;
  if (u != s_ && u != t_) {
    imbalance_[u] += by;
    excess_.push_back(u);
  }
  if (v != s_ && v != t_) {
    imbalance_[v] -= by;
    deficit_.push_back(v);
  }
}

// Restores conservation by lowering flows only, which keeps every capacity satisfied. A deficit at v is passed
// on to the heads of v's flow-carrying out-arcs, which have larger numbers (or are the sink), so processing the
// deficit nodes smallest first visits each once; symmetrically for excesses, largest first, towards the source.
// Lowering out-flows creates no excess and lowering in-flows no deficit, so the two passes are independent.
void WarmFlow::repair() {
  auto& heap = deficit_;
  std::make_heap(heap.begin(), heap.end(), std::greater<>());
  while (!heap.empty()) {
    std::pop_heap(heap.begin(), heap.end(), std::greater<>());
    const int v = heap.back();
    heap.pop_back();
    for (int k = first_[v]; k < first_[v + 1] && imbalance_[v] < 0; ++k) {
      const std::int64_t f = cres_[crev_[k]];
      if (!cfwd_[k] || f == 0) continue;
      const std::int64_t by = std::min(f, -imbalance_[v]);
      cres_[k] += by;
      cres_[crev_[k]] -= by;
      touched_.push_back(k);
      imbalance_[v] += by;
      const int w = cto_[k];
      if (w == s_) value_ += by;
      if (w != s_ && w != t_) {
        if (imbalance_[w] >= 0) {  // not queued yet (a queued deficit node is still negative)
          heap.push_back(w);
          std::push_heap(heap.begin(), heap.end(), std::greater<>());
        }
        imbalance_[w] -= by;
      }
    }
  }
  auto& top = excess_;
  std::make_heap(top.begin(), top.end());
  while (!top.empty()) {
    std::pop_heap(top.begin(), top.end());
    const int v = top.back();
    top.pop_back();
    for (int k = first_[v]; k < first_[v + 1] && imbalance_[v] > 0; ++k) {
      const std::int64_t f = cres_[k];  // flow of the forward arc u→v whose reverse is k
      if (cfwd_[k] || f == 0) continue;
      const std::int64_t by = std::min(f, imbalance_[v]);
      cres_[k] -= by;
      cres_[crev_[k]] += by;
      touched_.push_back(crev_[k]);
      imbalance_[v] -= by;
      const int u = cto_[k];
      if (u == s_) value_ -= by;
      if (u != s_ && u != t_) {
        if (imbalance_[u] <= 0) {
          top.push_back(u);
          std::push_heap(top.begin(), top.end());
        }
        imbalance_[u] += by;
      }
    }
  }
}

// --- Boykov–Kolmogorov search trees, kept from one solve to the next -------------------------------------
// The source tree S holds nodes reached from the source by residual arcs, the sink tree T nodes that reach the
// sink; parent_[v] is the CSR position of v's tree arc (p→v in p's list for S, v→p in v's list for T), so the
// tree arc is alive while cres_[parent_[v]] > 0. Active nodes still have to scan their arcs; when a scan meets
// the other tree, the path through both trees is augmented and the nodes below saturated tree arcs become
// orphans, which are re-attached to their tree or freed. At the end no node is active, so no residual arc
// leaves S: S is exactly the set reachable from the source (the minimal source side) and the flow is maximum.
// Between solves the trees stay; a changed arc only orphans an endpoint whose tree arc it saturated and
// re-activates both endpoints, so a step costs about the size of what changed rather than of the network.

void WarmFlow::activate(int v) {
  if (tree_[v] == kFree) return;
  if (queued_[v]) {
    if (v == scanning_) rescan_ = true;  // an arc scanned earlier may lead somewhere new now
    return;
  }
  queued_[v] = 1;
  active_.push_back(v);
}

void WarmFlow::make_orphan(int v) {
  parent_[v] = kNone;
  orphans_.push_back(v);
}

// Tree arcs that a capacity change or the repair saturated, and nodes with new residual arcs.
void WarmFlow::note_changes() {
  ++time_;
  for (int k : touched_) {
    for (int z : {cto_[k], cto_[crev_[k]]}) {
      if (parent_[z] >= 0 && cres_[parent_[z]] == 0) make_orphan(z);
      activate(z);
    }
  }
  touched_.clear();
}

// Distance of w to its tree's root along tree arcs, or -1 when an orphan cuts it off. Marks the nodes on the
// way with the current time so that later checks stop early (Boykov & Kolmogorov 2004, §3.2.3 heuristics).
int WarmFlow::origin_distance(int w) {
  int d = 0;
  int x = w;
  while (true) {
    if (ts_[x] == time_) {
      d += dist_[x];
      break;
    }
    if (parent_[x] == kRoot) {
      ts_[x] = time_;
      dist_[x] = 0;
      break;
    }
    if (parent_[x] == kNone) return -1;
    ++d;
    x = parent_node_[x];
  }
  for (int y = w, dy = d; ts_[y] != time_; y = parent_node_[y], --dy) {
    ts_[y] = time_;
    dist_[y] = dy;
  }
  return d;
}

void WarmFlow::adopt() {
  for (std::size_t h = 0; h < orphans_.size(); ++h) {
    const int v = orphans_[h];
    if (parent_[v] != kNone) continue;  // made a root since it was orphaned
    const bool in_s = tree_[v] == kSourceTree;
    int best = kNone, best_node = kNone, best_d = 0;
    for (int k = first_[v]; k < first_[v + 1]; ++k) {
      const int w = cto_[k];
      const int arc = in_s ? crev_[k] : k;  // w→v for S, v→w for T
      if (tree_[w] != tree_[v] || cres_[arc] == 0) continue;
      const int d = origin_distance(w);
      if (d >= 0 && (best == kNone || d < best_d)) {
        best = arc;
        best_node = w;
        best_d = d;
      }
    }
    if (best != kNone) {
      parent_[v] = best;
      parent_node_[v] = best_node;
      ts_[v] = time_;
      dist_[v] = best_d + 1;
      continue;
    }
    // No way back to the root: v leaves its tree. Neighbours that could reach it again must rescan, and its
    // children are orphans in turn.
    for (int k = first_[v]; k < first_[v + 1]; ++k) {
      const int w = cto_[k];
      if (tree_[w] != tree_[v]) continue;
      if (cres_[in_s ? crev_[k] : k] > 0) activate(w);
      if (parent_[w] >= 0 && parent_node_[w] == v) make_orphan(w);
    }
    tree_[v] = kFree;
  }
  orphans_.clear();
}

// Pushes the bottleneck along root → … → a → b → … → root, where m is the residual arc a→b (a in S, b in T).
// A root other than the source or sink is a node with excess (S) or deficit (T), which bounds the push and
// shrinks by it; such a root becomes an orphan when balanced. Returns the increase of the flow value, which
// only a path from the source itself changes.
std::int64_t WarmFlow::augment(int m) {
  std::int64_t by = cres_[m];
  int root_s = cto_[crev_[m]], root_t = cto_[m];
  for (; parent_[root_s] != kRoot; root_s = parent_node_[root_s]) by = std::min(by, cres_[parent_[root_s]]);
  for (; parent_[root_t] != kRoot; root_t = parent_node_[root_t]) by = std::min(by, cres_[parent_[root_t]]);
  if (root_s != s_) by = std::min(by, imbalance_[root_s]);
  if (root_t != t_) by = std::min(by, -imbalance_[root_t]);
  cres_[m] -= by;
  cres_[crev_[m]] += by;
  for (int x : {cto_[crev_[m]], cto_[m]}) {
    while (parent_[x] != kRoot) {
      const int k = parent_[x], up = parent_node_[x];
      cres_[k] -= by;
      cres_[crev_[k]] += by;
      if (cres_[k] == 0) make_orphan(x);
      x = up;
    }
  }
  if (root_s != s_ && (imbalance_[root_s] -= by) == 0) make_orphan(root_s);
  if (root_t != t_ && (imbalance_[root_t] += by) == 0) make_orphan(root_t);
  ++time_;
  return root_s == s_ ? by : 0;
}

// Makes v a root of `tree` (an unbalanced node, see solve()).
void WarmFlow::make_root(int v, char tree) {
  if (tree_[v] != kFree && tree_[v] != tree) {
    // Its children in the other tree reached that tree's root through v, and its neighbours there may now have
    // a residual arc into the other tree (a path v's own scan would miss if v stops being a root before it).
    for (int k = first_[v]; k < first_[v + 1]; ++k) {
      const int w = cto_[k];
      if (tree_[w] != tree_[v]) continue;
      if (parent_[w] >= 0 && parent_node_[w] == v) make_orphan(w);
      activate(w);
    }
  }
  tree_[v] = tree;
  parent_[v] = kRoot;
  parent_node_[v] = kNone;
  roots_.push_back(v);
  activate(v);
}

// Grows the trees and augments until no node is active (or the value reaches kInfinity).
std::int64_t WarmFlow::grow(std::int64_t value) {
  // Active nodes in first-in first-out order; pos is the scan position in the arcs of active_[h].
  std::size_t h = 0;
  int pos = kNone;
  while (h < active_.size() && value < kInfinity) {
    const int v = active_[h];
    if (tree_[v] == kFree) {
      queued_[v] = 0;
      ++h;
      pos = kNone;
      continue;
    }
    if (pos == kNone) pos = first_[v];
    scanning_ = v;
    rescan_ = false;
    int meet = kNone;
    const bool in_s = tree_[v] == kSourceTree;
    for (; pos < first_[v + 1]; ++pos) {
      const int w = cto_[pos];
      const int arc = in_s ? pos : crev_[pos];  // v→w for S, w→v for T
      if (cres_[arc] == 0) continue;
      if (tree_[w] == kFree) {
        tree_[w] = tree_[v];
        parent_[w] = arc;
        parent_node_[w] = v;
        ts_[w] = ts_[v];
        dist_[w] = dist_[v] + 1;
        activate(w);
      } else if (tree_[w] != tree_[v]) {
        meet = arc;
        break;
      }
    }
    if (meet == kNone) {  // v is done: every residual arc of it stays inside its tree
      queued_[v] = 0;
      ++h;
      pos = kNone;
      continue;
    }
    value += augment(meet);
    adopt();
    // The arcs before pos need no second look unless the adoption re-activated v.
    if (rescan_) pos = kNone;
  }
  active_.clear();
  scanning_ = kNone;
  return value;
}

std::int64_t WarmFlow::source_outflow() const {
  std::int64_t value = 0;
  for (int k = first_[s_]; k < first_[s_ + 1]; ++k) value += cfwd_[k] ? cres_[crev_[k]] : -cres_[k];
  return value;
}

// Lowered capacities leave nodes with excess or deficit. Rather than cancelling that flow back to the source
// and sink at once (repair(), which the next augmentations would mostly have to redo), each such node first
// becomes a root: an excess can be pushed on to the sink, a deficit filled from the source, by the same tree
// search. What is left is cancelled by repair(), the roots return to plain nodes, and a second search restores
// the invariant that the source tree is exactly the set reachable from the source.
std::int64_t WarmFlow::solve() {
  if (!built_) build();
  for (int v : excess_)
    if (imbalance_[v] > 0 && parent_[v] != kRoot) make_root(v, kSourceTree);
  for (int v : deficit_)
    if (imbalance_[v] < 0 && parent_[v] != kRoot) make_root(v, kSinkTree);
  excess_.clear();
  deficit_.clear();
  note_changes();
  adopt();
  value_ = grow(value_);
  if (!roots_.empty() && value_ < kInfinity) {
    for (int v : roots_) {
      if (imbalance_[v] > 0) excess_.push_back(v);
      else if (imbalance_[v] < 0) deficit_.push_back(v);
    }
    repair();
    for (int v : roots_)
      if (parent_[v] == kRoot) make_orphan(v);
    note_changes();
    adopt();
    value_ = grow(value_);
  }
  roots_.clear();
  assert(value_ >= kInfinity || value_ == source_outflow());
  return std::min(value_, kInfinity);
}

const std::vector<char>& WarmFlow::source_side() const {
  for (int v = 0; v < n_; ++v) side_[v] = tree_[v] == kSourceTree;
  return side_;
}

}  // namespace gearshift::pipeline
