#include "plan/schedule.hpp"

namespace gearshift::plan {

std::vector<std::size_t> Schedule::change_positions() const {
  std::vector<std::size_t> out;
  const std::size_t n = clocks.size();
  for (std::size_t i = 0; i < n; ++i)
    if (!(clocks[i] == clocks[(i + n - 1) % n])) out.push_back(i);
  return out;
}

std::vector<Phase> phases_of(const Schedule& s) {
  std::vector<Phase> out;
  for (std::size_t i = 0; i < s.clocks.size(); ++i) {
    if (out.empty() || !(out.back().clocks == s.clocks[i])) out.push_back({i, i, s.clocks[i]});
    else out.back().last = i;
  }
  return out;
}

}  // namespace gearshift::plan
