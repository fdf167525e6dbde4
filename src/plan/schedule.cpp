#include "plan/schedule.hpp"

#include <ostream>

namespace gearshift::plan {

const char* to_string(Strategy s) {
  switch (s) {
    case Strategy::baseline: return "default";
    case Strategy::iteration: return "iteration";
    case Strategy::pass: return "pass";
    case Strategy::kernel_local: return "kernel-local";
    case Strategy::kernel_global: return "kernel-global";
    case Strategy::phase: return "phase";
  }
  return "default";
}

std::optional<Strategy> parse_strategy(std::string_view name) {
  for (Strategy s : {Strategy::iteration, Strategy::pass, Strategy::kernel_local, Strategy::kernel_global,
                     Strategy::phase})
    if (name == to_string(s)) return s;
  return std::nullopt;
}

std::ostream& operator<<(std::ostream& out, Strategy s) { return out << to_string(s); }

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
