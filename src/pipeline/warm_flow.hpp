// Maximum flow / minimum cut on a fixed network whose capacities change a little between solves, for networks
// whose nodes are numbered in topological order.
//
// The frontier solver solves one min cut per unit step on a critical network that changes little between steps.
// The network of every step is laid out once over all operations (arcs of non-critical operations get capacity
// 0), so a step only changes the capacities of the few arcs whose operation changed duration or criticality.
// The flow and the Boykov–Kolmogorov search trees (Boykov & Kolmogorov, IEEE TPAMI 26(9), 2004) are kept from
// one solve to the next, as in dynamic graph cuts (Kohli & Torr, IEEE TPAMI 29(12), 2007): a changed arc only
// disturbs the trees around it. Lowering a capacity below its flow leaves an excess at the arc's tail and a
// deficit at its head; those nodes become extra roots of the source and sink trees, so the same search reroutes
// the flow, and only what cannot be rerouted is cancelled towards the source and sink (which is where the
// topological numbering is used). The minimal source side (nodes reachable from the source in the residual
// network) is the same for every maximum flow, so the cut chosen equals the one a cold-started max-flow (e.g.
// Boost.Graph's Boykov–Kolmogorov in min_cut.hpp) would give; tests/warm_flow_test.cpp checks that over random
// sequences of changes.
#pragma once

#include <cstdint>
#include <vector>

namespace gearshift::pipeline {

class WarmFlow {
 public:
  static constexpr std::int64_t kInfinity = std::int64_t{1} << 52;

  // Nodes 0..n−1, no arcs. Every arc u→v other than those leaving `source` or entering `sink` must have u < v
  // (acyclic).
  void reset(int n, int source, int sink);
  // Adds arc u→v with capacity 0 and returns its index. Only before the first set_capacity() or solve().
  int add_arc(int u, int v);
  // Changes an arc's capacity; its flow is lowered to the new capacity when above it.
  void set_capacity(int arc, std::int64_t capacity);
  std::int64_t capacity(int arc) const { return cap_[static_cast<std::size_t>(arc)]; }
  // Restores conservation where set_capacity() broke it, by rerouting or else cancelling flow, and augments to a
  // maximum flow. Returns its value, capped at kInfinity; once the value has reached kInfinity the object must
  // be reset before another solve.
  std::int64_t solve();
  std::int64_t flow(int arc) const { return cres_[crev_[fwd_pos_[static_cast<std::size_t>(arc)]]]; }
  // source_side()[v] is 1 for the nodes reachable from the source in the residual network after solve(): the
  // source tree. in_source_side(v) is the same for one node, without filling the whole vector.
  const std::vector<char>& source_side() const;
  bool in_source_side(int v) const { return tree_[static_cast<std::size_t>(v)] == kSourceTree; }

 private:
  void build();
  void repair();
  void activate(int v);
  void make_orphan(int v);
  void note_changes();
  int origin_distance(int w);
  void adopt();
  std::int64_t augment(int m);
  void make_root(int v, char tree);
  std::int64_t grow(std::int64_t value);
  std::int64_t source_outflow() const;

  int n_ = 0, s_ = 0, t_ = 1;
  // Flow value (out of the source minus into it), kept up to date wherever a flow at the source changes, so
  // that a solve need not sum the source's arcs (one per operation).
  std::int64_t value_ = 0;
  bool built_ = false;
  std::vector<int> from_, to_;  // by arc index, as added
  std::vector<std::int64_t> cap_;  // by arc index, so that callers can skip unchanged capacities cheaply
  // Residual arcs laid out contiguously by tail node (CSR): a forward arc and its reverse point at each other
  // through crev_; cres_ is the residual capacity, so an arc's flow is its reverse's residual capacity.
  std::vector<int> first_, cto_, crev_, fwd_pos_;
  std::vector<std::int64_t> cres_;
  std::vector<char> cfwd_;
  // Inflow − outflow per node left by lowered flows, and the nodes where it may be nonzero (worklists of
  // solve() and repair()).
  std::vector<std::int64_t> imbalance_;
  std::vector<int> deficit_, excess_;
  mutable std::vector<char> side_;
  // Search trees (see warm_flow.cpp): tree_ is kFree / kSourceTree / kSinkTree, parent_ the CSR position of
  // the tree arc, parent_node_ the node at its other end; ts_/dist_ cache distances to the root, valid while
  // ts_ == time_.
  static constexpr char kFree = 0, kSourceTree = 1, kSinkTree = 2;
  std::vector<char> tree_, queued_;
  std::vector<int> parent_, parent_node_, ts_, dist_, active_, orphans_;
  std::vector<int> roots_;    // unbalanced nodes made roots in this solve
  std::vector<int> touched_;  // CSR positions of forward arcs whose residual changed outside a solve
  int time_ = 1;
  int scanning_ = -1;
  bool rescan_ = false;
};

}  // namespace gearshift::pipeline
