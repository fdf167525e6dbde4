#include "pipeline/min_cut.hpp"

#include <algorithm>

// GCC 12+ reports a false maybe-uninitialized inside Boost.Graph's edge iterators (boost::optional storage).
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include <boost/graph/adjacency_list.hpp>
#include <boost/graph/boykov_kolmogorov_max_flow.hpp>

namespace gearshift::pipeline {

namespace {
using Traits = boost::adjacency_list_traits<boost::vecS, boost::vecS, boost::directedS>;
using Graph = boost::adjacency_list<
    boost::vecS, boost::vecS, boost::directedS,
    boost::property<boost::vertex_color_t, boost::default_color_type,
                    boost::property<boost::vertex_distance_t, long,
                                    boost::property<boost::vertex_predecessor_t, Traits::edge_descriptor>>>,
    boost::property<boost::edge_capacity_t, std::int64_t,
                    boost::property<boost::edge_residual_capacity_t, std::int64_t,
                                    boost::property<boost::edge_reverse_t, Traits::edge_descriptor>>>>;
}  // namespace

struct MinCut::Impl {
  Graph g;
  int source = 0, sink = 1;
};

MinCut::MinCut() : impl_(std::make_unique<Impl>()) {}
MinCut::~MinCut() = default;

void MinCut::reset(int n, int source, int sink) {
  impl_->g = Graph(static_cast<std::size_t>(n));
  impl_->source = source;
  impl_->sink = sink;
}

void MinCut::add_edge(int u, int v, std::int64_t capacity) {
  auto& g = impl_->g;
  auto cap = boost::get(boost::edge_capacity, g);
  auto rev = boost::get(boost::edge_reverse, g);
  auto e = boost::add_edge(static_cast<std::size_t>(u), static_cast<std::size_t>(v), g).first;
  auto r = boost::add_edge(static_cast<std::size_t>(v), static_cast<std::size_t>(u), g).first;
  cap[e] = capacity;
  cap[r] = 0;
  rev[e] = r;
  rev[r] = e;
}

std::int64_t MinCut::solve() {
  auto& g = impl_->g;
  const auto n = boost::num_vertices(g);
  std::int64_t flow = boost::boykov_kolmogorov_max_flow(g, static_cast<std::size_t>(impl_->source),
                                                         static_cast<std::size_t>(impl_->sink));
  // Residual reachability from the source gives the minimal source side.
  auto res = boost::get(boost::edge_residual_capacity, g);
  side_.assign(n, 0);
  std::vector<std::size_t> stack{static_cast<std::size_t>(impl_->source)};
  side_[impl_->source] = 1;
  while (!stack.empty()) {
    auto u = stack.back();
    stack.pop_back();
    for (auto [it, end] = boost::out_edges(u, g); it != end; ++it) {
      auto v = boost::target(*it, g);
      if (!side_[v] && res[*it] > 0) {
        side_[v] = 1;
        stack.push_back(v);
      }
    }
  }
  return std::min(flow, kInfinity);
}

}  // namespace gearshift::pipeline
