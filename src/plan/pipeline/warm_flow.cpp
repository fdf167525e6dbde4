#include "plan/pipeline/warm_flow.hpp"

#include <algorithm>
#include <cassert>
#include <functional>

namespace gearshift::pipeline {

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
  it_.assign(first_.begin(), first_.end() - 1);
  const auto residual = static_cast<std::size_t>(2 * arcs);
  cto_.resize(residual);
  crev_.resize(residual);
  cfwd_.resize(residual);
  cres_.assign(residual, 0);
  fwd_pos_.resize(static_cast<std::size_t>(arcs));
  for (int a = 0; a < arcs; ++a) {
    const int f = it_[from_[a]]++, r = it_[to_[a]]++;
    cto_[f] = to_[a];
    cto_[r] = from_[a];
    crev_[f] = r;
    crev_[r] = f;
    cfwd_[f] = 1;
    cfwd_[r] = 0;
    fwd_pos_[a] = f;
  }
  imbalance_.assign(n, 0);
  deficit_.clear();
  excess_.clear();
  level_.assign(n, -1);
  side_.assign(n, 0);
  built_ = true;
}

void WarmFlow::set_capacity(int arc, std::int64_t capacity) {
  if (!built_) build();
  cap_[static_cast<std::size_t>(arc)] = capacity;
  const int k = fwd_pos_[static_cast<std::size_t>(arc)], r = crev_[k];
  const std::int64_t f = cres_[r];
  if (f <= capacity) {
    cres_[k] = capacity - f;
    return;
  }
  // The tail now sends less than it receives (excess), the head receives less than it sends (deficit).
  cres_[k] = 0;
  cres_[r] = capacity;
  const std::int64_t by = f - capacity;
  const int u = from_[static_cast<std::size_t>(arc)], v = to_[static_cast<std::size_t>(arc)];
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
      imbalance_[v] += by;
      const int w = cto_[k];
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
      imbalance_[v] -= by;
      const int u = cto_[k];
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

bool WarmFlow::bfs() {
  std::fill(level_.begin(), level_.end(), -1);
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
  if (!built_) build();
  repair();
  std::int64_t value = 0;
  for (int k = first_[s_]; k < first_[s_ + 1]; ++k) value += cfwd_[k] ? cres_[crev_[k]] : -cres_[k];
  while (value < kInfinity && bfs()) {
    std::copy(first_.begin(), first_.end() - 1, it_.begin());
    value += dfs(s_, kInfinity);
  }
  for (int v = 0; v < n_; ++v) side_[v] = level_[v] >= 0;
  return std::min(value, kInfinity);
}

}  // namespace gearshift::pipeline
