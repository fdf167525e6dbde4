// Maximum flow / minimum cut with a warm start, for networks whose nodes are numbered in topological order.
//
// The frontier solver solves one min cut per unit step on a critical network that changes little between steps.
// Starting Dinic's algorithm (Dinic 1970) from the previous step's flow, first clamped to the new capacities and
// made conservative again, leaves only a few augmentations per step. The minimal source side (nodes reachable
// from the source in the residual network) is the same for every maximum flow, so the cut chosen equals the one
// a cold-started max-flow (e.g. Boost.Graph's Boykov–Kolmogorov in min_cut.hpp) would give.
#pragma once

#include <cstdint>
#include <vector>

namespace gearshift::pipeline {

class WarmFlow {
 public:
  static constexpr std::int64_t kInfinity = std::int64_t{1} << 52;

  // Nodes 0..n−1. Every arc u→v other than those leaving `source` or entering `sink` must have u < v (acyclic).
  void reset(int n, int source, int sink);
  // Adds arc u→v with the given capacity, starting at min(initial_flow, capacity). Returns the arc's index.
  int add_arc(int u, int v, std::int64_t capacity, std::int64_t initial_flow);
  // Restores conservation of the initial flow (lowering flows only), then augments to a maximum flow.
  // Returns its value, capped at kInfinity.
  std::int64_t solve();
  std::int64_t flow(int arc) const { return cres_[crev_[fwd_pos_[static_cast<std::size_t>(arc)]]]; }
  const std::vector<char>& source_side() const { return side_; }

 private:
  bool bfs();
  std::int64_t dfs(int v, std::int64_t pushed);

  int n_ = 0, s_ = 0, t_ = 1;
  // Arcs as added: residual arc 2k is arc k, 2k+1 its reverse.
  std::vector<int> from_, to_;
  std::vector<std::int64_t> res_;
  // The same residual arcs laid out contiguously by tail node (CSR) for cache-friendly scans.
  std::vector<int> first_, cto_, crev_, fwd_pos_, it_, level_, queue_;
  std::vector<std::int64_t> cres_, in_, out_;
  std::vector<int> pos_;
  std::vector<char> cfwd_;
  std::vector<char> side_;
};

}  // namespace gearshift::pipeline
