#include "graph/board_gaps.hpp"

#include <algorithm>
#include <numeric>
#include <stdexcept>

namespace gearshift::graph {

std::vector<double> board_gaps_after_ns(const std::vector<double>& start_ns, const std::vector<double>& end_ns,
                                        double next_start_ns) {
  const std::size_t n = start_ns.size();
  if (end_ns.size() != n) throw std::invalid_argument("board_gaps_after_ns: as many ends as starts needed");
  std::vector<double> gap(n, 0.0);
  if (n == 0) return gap;
  std::vector<std::size_t> order(n);
  std::iota(order.begin(), order.end(), std::size_t{0});
  if (!std::is_sorted(start_ns.begin(), start_ns.end()))
    std::stable_sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) { return start_ns[a] < start_ns[b]; });
  std::size_t ender = order[0];
  double busy_until = end_ns[ender];
  for (std::size_t k = 1; k < n; ++k) {
    const std::size_t i = order[k];
    if (start_ns[i] > busy_until) gap[ender] = start_ns[i] - busy_until;
    if (end_ns[i] >= busy_until) busy_until = end_ns[i], ender = i;
  }
  gap[ender] = std::max(0.0, next_start_ns - busy_until);
  return gap;
}

}  // namespace gearshift::graph
