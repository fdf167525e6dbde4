#include "pipeline/profile_groups.hpp"

#include <algorithm>
#include <map>
#include <utility>

namespace gearshift::pipeline {

std::string ProfileGroup::label() const {
  const std::string instr = instruction_name(instruction);
  if (stages.size() == 1) return "stage " + std::to_string(stages.front()) + " " + instr;
  const bool contiguous = stages.back() - stages.front() + 1 == static_cast<int>(stages.size());
  std::string s = "stages ";
  if (contiguous) {
    s += std::to_string(stages.front()) + "-" + std::to_string(stages.back());
  } else {
    for (std::size_t i = 0; i < stages.size(); ++i) {
      if (i) s += ',';
      s += std::to_string(stages[i]);
    }
  }
  return s + " " + instr;
}

std::vector<ProfileGroup> distinct_groups(const Profile& profile, int mem_mhz) {
  using model::Sample;
  // (stage, instruction) -> samples in file order, then sorted by clock.
  std::map<std::pair<int, int>, ProfileGroup> by_key;
  for (const auto& r : profile.rows) {
    auto& g = by_key[{r.stage, static_cast<int>(r.instruction)}];
    g.stages = {r.stage};
    g.instruction = r.instruction;
    g.samples.push_back({r.sm_clock_mhz, mem_mhz, r.time_s, r.energy_j});
  }
  std::vector<ProfileGroup> out;
  for (auto& [key, g] : by_key) {
    std::sort(g.samples.begin(), g.samples.end(), [](const Sample& a, const Sample& b) { return a.sm_mhz < b.sm_mhz; });
    auto same = [&](const ProfileGroup& o) {
      return o.instruction == g.instruction && o.samples.size() == g.samples.size() &&
             std::equal(o.samples.begin(), o.samples.end(), g.samples.begin(), [](const Sample& a, const Sample& b) {
               return a.sm_mhz == b.sm_mhz && a.time_s == b.time_s && a.energy_j == b.energy_j;
             });
    };
    auto it = std::find_if(out.begin(), out.end(), same);
    if (it != out.end())
      it->stages.push_back(key.first);
    else
      out.push_back(g);
  }
  return out;
}

}  // namespace gearshift::pipeline
