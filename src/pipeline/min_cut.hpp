// Minimum s–t cut with integer capacities, on Boost.Graph's Boykov–Kolmogorov max-flow.
// The object is reused across solver steps so that its storage is allocated once.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

namespace gearshift::pipeline {

class MinCut {
 public:
  static constexpr std::int64_t kInfinity = std::int64_t{1} << 52;  // "cannot be cut"

  MinCut();
  ~MinCut();
  MinCut(const MinCut&) = delete;
  MinCut& operator=(const MinCut&) = delete;

  // Starts a new problem with nodes 0..n−1; source and sink are two of them.
  void reset(int n, int source, int sink);
  void add_edge(int u, int v, std::int64_t capacity);
  // Max-flow value (= min-cut capacity), capped at kInfinity. Afterwards source_side()[v] is 1 for the nodes
  // reachable from the source in the residual network: the minimal source side among all minimum cuts.
  std::int64_t solve();
  const std::vector<char>& source_side() const { return side_; }

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
  std::vector<char> side_;
};

}  // namespace gearshift::pipeline
