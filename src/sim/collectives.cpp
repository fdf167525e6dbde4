#include "sim/collectives.hpp"

#include <algorithm>
#include <limits>
#include <stdexcept>
#include <string>

namespace gearshift::sim {

RanksResult simulate_ranks(const std::vector<RankReplay>& ranks, double latency_ns) {
  if (ranks.empty()) throw std::invalid_argument("simulate_ranks: no rank");
  const std::size_t nr = ranks.size();
  std::vector<model::Workload> w(nr);
  std::vector<graph::StepGraph> g(nr);
  std::vector<std::vector<std::size_t>> comm(nr);
  for (std::size_t r = 0; r < nr; ++r) {
    w[r] = *ranks[r].workload;
    for (std::size_t i = 0; i < w[r].ops.size(); ++i)
      if (w[r].ops[i].cls == model::KernelClass::communication) comm[r].push_back(i);
    if (comm[r].size() != comm[0].size())
      throw std::invalid_argument("simulate_ranks: rank " + std::to_string(r) + " issues " + std::to_string(comm[r].size()) +
                                  " collectives per step, rank 0 " + std::to_string(comm[0].size()));
  }
  // A collective's transfer: the least traced time of it over the ranks (the rest was waiting).
  for (std::size_t c = 0; c < comm[0].size(); ++c) {
    double least = std::numeric_limits<double>::infinity();
    for (std::size_t r = 0; r < nr; ++r) least = std::min(least, w[r].ops[comm[r][c]].ref_time_ns);
    for (std::size_t r = 0; r < nr; ++r) w[r].ops[comm[r][c]].ref_time_ns = least;
  }
  for (std::size_t r = 0; r < nr; ++r) {
    // The graph of the traced template: its gaps are the traced ones, not those around the shortened collectives.
    g[r] = graph::build_step_graph(*ranks[r].workload);
    if (!g[r].dependency)
      throw std::invalid_argument("simulate_ranks: rank " + std::to_string(r) + ": " + g[r].note);
  }
  constexpr double kNone = -std::numeric_limits<double>::infinity();
  std::vector<std::vector<double>> floor(nr);
  for (std::size_t r = 0; r < nr; ++r) floor[r].assign(w[r].ops.size(), kNone);
  RanksResult out;
  for (out.rounds = 1; out.rounds <= kMaxCollectiveRounds; ++out.rounds) {
    out.ranks.clear();
    for (std::size_t r = 0; r < nr; ++r)
      out.ranks.push_back(simulate(w[r], g[r], *ranks[r].model, ranks[r].schedule, latency_ns, true, &floor[r]));
    bool moved = false;
    for (std::size_t c = 0; c < comm[0].size(); ++c) {
      // Each rank's own "can end": its start plus its transfer at the clocks it ran at.
      double end = kNone;
      for (std::size_t r = 0; r < nr; ++r) {
        const auto& e = out.ranks[r].timeline[comm[r][c]];
        const auto& op = w[r].ops[comm[r][c]];
        const double own = e.start_ns + ranks[r].model->predict(op.ref_time_ns, op.ref, e.requested, op.coeffs).time_ns;
        end = std::max(end, own);
      }
      for (std::size_t r = 0; r < nr; ++r) {
        double& f = floor[r][comm[r][c]];
        if (end > f + 1e-3) f = end, moved = true;
      }
    }
    if (!moved) break;
  }
  for (const auto& s : out.ranks) out.job_step_time_ns = std::max(out.job_step_time_ns, s.step_time_ns);
  return out;
}

}  // namespace gearshift::sim
