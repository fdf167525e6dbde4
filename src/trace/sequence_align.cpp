#include "trace/sequence_align.hpp"

#include <algorithm>

namespace gearshift::trace {

std::vector<std::int64_t> align_lcs(const std::vector<std::uint32_t>& a, const std::uint32_t* b, std::size_t m,
                                    std::size_t max_d) {
  const std::int64_t N = static_cast<std::int64_t>(a.size()), M = static_cast<std::int64_t>(m);
  const std::int64_t D = std::min<std::int64_t>(static_cast<std::int64_t>(max_d), N + M);
  std::vector<std::int64_t> v(static_cast<std::size_t>(2 * D + 3), 0);  // furthest x on diagonal k, at v[k + D + 1]
  std::vector<std::vector<std::int64_t>> snaps;  // v[-d..d] after round d, for the traceback
  auto at = [&](std::int64_t k) -> std::int64_t& { return v[static_cast<std::size_t>(k + D + 1)]; };
  std::int64_t done = -1;
  for (std::int64_t d = 0; d <= D && done < 0; ++d) {
    for (std::int64_t k = -d; k <= d; k += 2) {
      std::int64_t x = (k == -d || (k != d && at(k - 1) < at(k + 1))) ? at(k + 1) : at(k - 1) + 1;
      std::int64_t y = x - k;
      while (x < N && y < M && a[static_cast<std::size_t>(x)] == b[y]) ++x, ++y;
      at(k) = x;
      if (x >= N && y >= M) done = d;
    }
    snaps.emplace_back(v.begin() + (D + 1 - d), v.begin() + (D + 2 + d));
  }
  std::vector<std::int64_t> map;
  if (done < 0) return map;
  map.assign(a.size(), -1);
  std::int64_t x = N, y = M;
  for (std::int64_t d = done; d >= 0; --d) {
    const std::int64_t k = x - y;
    std::int64_t sx = 0, sy = 0;  // where this round's diagonal run (snake) starts
    if (d > 0) {
      const auto& prev = snaps[static_cast<std::size_t>(d - 1)];  // holds diagonals -(d-1)..(d-1)
      auto pv = [&](std::int64_t kk) { return prev[static_cast<std::size_t>(kk + d - 1)]; };
      const bool down = k == -d || (k != d && pv(k - 1) < pv(k + 1));
      const std::int64_t pk = down ? k + 1 : k - 1, px = pv(pk), py = px - pk;
      sx = down ? px : px + 1;
      sy = down ? py + 1 : py;
      while (x > sx && y > sy) --x, --y, map[static_cast<std::size_t>(x)] = y;
      x = px, y = py;
    } else {
      while (x > 0 && y > 0) --x, --y, map[static_cast<std::size_t>(x)] = y;
    }
  }
  return map;
}

}  // namespace gearshift::trace
