// WarmFlow keeps its flow and search trees from one solve to the next; after every batch of capacity changes
// its value and minimal source side must equal those of Boost.Graph's Boykov–Kolmogorov solved from scratch.
// The networks mimic the frontier's: a DAG numbered in topological order, many source and sink arcs, arcs
// switched between 0, finite capacities and "infinity", and capacities lowered below their flow.
#include <random>
#include <vector>

#include <gtest/gtest.h>

#include "pipeline/min_cut.hpp"
#include "pipeline/warm_flow.hpp"

using namespace gearshift::pipeline;

namespace {

struct Arc {
  int u, v;
};

void run_random_sequence(unsigned seed, int inner, int extra_arcs, int solves) {
  std::mt19937 rng(seed);
  const int n = 2 + inner;  // 0 source, 1 sink
  std::vector<Arc> arcs;
  for (int x = 2; x < n; ++x) {
    arcs.push_back({0, x});
    arcs.push_back({x, 1});
  }
  std::uniform_int_distribution<int> node(2, n - 1);
  for (int k = 0; k < extra_arcs; ++k) {
    int a = node(rng), b = node(rng);
    if (a == b) continue;
    if (a > b) std::swap(a, b);
    arcs.push_back({a, b});
  }
  WarmFlow warm;
  warm.reset(n, 0, 1);
  std::vector<int> id;
  for (const auto& a : arcs) id.push_back(warm.add_arc(a.u, a.v));
  std::vector<std::int64_t> cap(arcs.size(), 0);
  auto random_cap = [&]() -> std::int64_t {
    switch (rng() % 6) {
      case 0: return 0;
      case 1: return WarmFlow::kInfinity;
      case 2: return 1;
      default: return static_cast<std::int64_t>(rng() % 50);
    }
  };
  // Source and sink arcs stay finite so that the value stays below infinity.
  auto set = [&](std::size_t k, std::int64_t c) {
    if ((arcs[k].u == 0 || arcs[k].v == 1) && c == WarmFlow::kInfinity) c = 40;
    cap[k] = c;
    warm.set_capacity(id[k], c);
  };
  for (std::size_t k = 0; k < arcs.size(); ++k) set(k, random_cap());
  for (int step = 0; step < solves; ++step) {
    const std::int64_t value = warm.solve();
    MinCut ref;
    ref.reset(n, 0, 1);
    for (std::size_t k = 0; k < arcs.size(); ++k) ref.add_edge(arcs[k].u, arcs[k].v, cap[k]);
    ASSERT_EQ(value, ref.solve()) << "seed " << seed << " solve " << step;
    ASSERT_EQ(warm.source_side(), ref.source_side()) << "seed " << seed << " solve " << step;
    // Flows respect capacities and conservation.
    std::vector<std::int64_t> balance(n, 0);
    for (std::size_t k = 0; k < arcs.size(); ++k) {
      const std::int64_t f = warm.flow(id[k]);
      ASSERT_GE(f, 0);
      ASSERT_LE(f, cap[k]);
      balance[arcs[k].u] -= f;
      balance[arcs[k].v] += f;
    }
    for (int x = 2; x < n; ++x) ASSERT_EQ(balance[x], 0) << "node " << x;
    ASSERT_EQ(balance[1], value);
    // A few changes, as between unit steps; lowering a loaded arc is the interesting case.
    const int changes = 1 + static_cast<int>(rng() % 6);
    for (int c = 0; c < changes; ++c) {
      const std::size_t k = rng() % arcs.size();
      const std::int64_t f = warm.flow(id[k]);
      if (f > 0 && rng() % 2) set(k, rng() % 3 ? 0 : f / 2);
      else set(k, random_cap());
    }
  }
}

}  // namespace

TEST(WarmFlow, MatchesBoykovKolmogorovFromScratchOverChangingCapacities) {
  for (unsigned seed = 1; seed <= 60; ++seed) run_random_sequence(seed, 12, 30, 40);
}

TEST(WarmFlow, MatchesOnLargerSparseNetworks) {
  for (unsigned seed = 100; seed < 110; ++seed) run_random_sequence(seed, 200, 500, 60);
}
