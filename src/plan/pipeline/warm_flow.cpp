#include "plan/pipeline/warm_flow.hpp"

#include <algorithm>
#include <cstdio>

namespace gearshift::pipeline {

void WarmFlow::reset(int n, int source, int sink) {
  n_ = n;
  s_ = source;
  t_ = sink;
  from_.clear();
  to_.clear();
  res_.clear();
}

int WarmFlow::add_arc(int u, int v, std::int64_t capacity, std::int64_t initial_flow) {
  const int id = static_cast<int>(from_.size() / 2);
  const std::int64_t f = std::clamp<std::int64_t>(initial_flow, 0, capacity);
  from_.push_back(u);
  to_.push_back(v);
  res_.push_back(capacity - f);
  from_.push_back(v);
  to_.push_back(u);
  res_.push_back(f);
  return id;
}

bool WarmFlow::bfs() {
  level_.assign(static_cast<std::size_t>(n_), -1);
  queue_.clear();
  queue_.push_back(s_);
  level_[s_] = 0;
  for (std::size_t h = 0; h < queue_.size(); ++h) {
    int v = queue_[h];
    // Levels beyond the sink's are useless to Dinic; the last (failing) search still covers everything reachable.
    if (level_[t_] >= 0 && level_[v] >= level_[t_]) break;
    for (int k = first_[v]; k < first_[v + 1]; ++k) {
      int w = cto_[k];
      if (cres_[k] > 0 && level_[w] < 0) {
        level_[w] = level_[v] + 1;
        queue_.push_back(w);
      }
    }
  }
  return level_[t_] >= 0;
}

// Blocking-flow search: pushes up to `limit` from v along level-increasing residual arcs.
std::int64_t WarmFlow::dfs(int v, std::int64_t limit) {
  if (v == t_) return limit;
  std::int64_t pushed = 0;
  for (int& k = it_[v]; k < first_[v + 1]; ++k) {
    int w = cto_[k];
    if (cres_[k] > 0 && level_[w] == level_[v] + 1) {
      std::int64_t got = dfs(w, std::min(limit - pushed, cres_[k]));
      if (got > 0) {
        cres_[k] -= got;
        cres_[crev_[k]] += got;
        pushed += got;
        if (pushed == limit) return pushed;
      }
    }
  }
  return pushed;
}

std::int64_t WarmFlow::solve() {
  const auto arcs = static_cast<int>(from_.size());
  first_.assign(static_cast<std::size_t>(n_) + 1, 0);
  for (int a = 0; a < arcs; ++a) ++first_[from_[a] + 1];
  for (int v = 0; v < n_; ++v) first_[v + 1] += first_[v];
  auto& pos = pos_;
  pos.resize(static_cast<std::size_t>(arcs));
  it_.assign(first_.begin(), first_.end() - 1);
  for (int a = 0; a < arcs; ++a) pos[a] = it_[from_[a]]++;
  cto_.resize(static_cast<std::size_t>(arcs));
  crev_.resize(static_cast<std::size_t>(arcs));
  cres_.resize(static_cast<std::size_t>(arcs));
  cfwd_.resize(static_cast<std::size_t>(arcs));
  fwd_pos_.resize(static_cast<std::size_t>(arcs / 2));
  for (int a = 0; a < arcs; ++a) {
    cto_[pos[a]] = to_[a];
    crev_[pos[a]] = pos[a ^ 1];
    cres_[pos[a]] = res_[a];
    cfwd_[pos[a]] = a % 2 == 0;
  }
  for (int a = 0; a < arcs; a += 2) fwd_pos_[a / 2] = pos[a];

  // Make the clamped initial flow conservative. Forward pass in topological order: cut outflow down to inflow;
  // backward pass: cut inflow down to outflow. Lowering flows keeps capacities satisfied.
  auto& in = in_;
  auto& out = out_;
  in.assign(static_cast<std::size_t>(n_), 0);
  out.assign(static_cast<std::size_t>(n_), 0);
  for (int a = 0; a < arcs; a += 2) {
    out[from_[a]] += res_[a + 1];
    in[to_[a]] += res_[a + 1];
  }
  auto lower = [&](int k, int tail, std::int64_t by) {  // k: CSR position of a forward arc
    cres_[k] += by;
    cres_[crev_[k]] -= by;
    out[tail] -= by;
    in[cto_[k]] -= by;
  };
  for (int v = 0; v < n_; ++v) {
    if (v == s_ || v == t_) continue;
    for (int k = first_[v]; k < first_[v + 1] && out[v] > in[v]; ++k)
      if (cfwd_[k] && cres_[crev_[k]] > 0) lower(k, v, std::min(cres_[crev_[k]], out[v] - in[v]));
  }
  for (int v = n_ - 1; v >= 0; --v) {
    if (v == s_ || v == t_) continue;
    for (int k = first_[v]; k < first_[v + 1] && in[v] > out[v]; ++k)
      if (!cfwd_[k] && cres_[k] > 0) lower(crev_[k], cto_[k], std::min(cres_[k], in[v] - out[v]));
  }
  while (bfs()) {
    it_.assign(first_.begin(), first_.end() - 1);
    dfs(s_, kInfinity);
  }
  std::int64_t value = 0;
  for (int k = first_[s_]; k < first_[s_ + 1]; ++k) value += cfwd_[k] ? cres_[crev_[k]] : -cres_[k];
  side_.assign(static_cast<std::size_t>(n_), 0);
  for (int v = 0; v < n_; ++v) side_[v] = level_[v] >= 0;
  return std::min(value, kInfinity);
}

}  // namespace gearshift::pipeline
