#include "model/perseus_profile.hpp"

#include "model/csv_fields.hpp"

#include <algorithm>
#include <charconv>
#include <fstream>
#include <map>
#include <sstream>
#include <stdexcept>

namespace gearshift::model {
namespace {


template <typename T>
T number(const std::string& field, const std::string& origin, int line_no, const char* column) {
  T v{};
  const char* end = field.data() + field.size();
  auto [ptr, ec] = std::from_chars(field.data(), end, v);
  if (ec != std::errc() || ptr != end || field.empty())
    throw std::invalid_argument(origin + ":" + std::to_string(line_no) + ": column '" + column +
                                "' is not a number: '" + field + "'");
  return v;
}

}  // namespace

std::vector<ProfileRow> parse_perseus_profile(const std::string& text, const std::string& origin) {
  std::istringstream in(text);
  std::string line;
  int line_no = 0;
  std::vector<ProfileRow> rows;
  while (std::getline(in, line)) {
    ++line_no;
    if (line_no == 1) {
      if (split_csv(line) != std::vector<std::string>{"stage", "instruction", "frequency", "time", "energy"})
        throw std::invalid_argument(origin + ":1: expected header 'stage,instruction,frequency,time,energy', got '" +
                                    line + "'");
      continue;
    }
    if (line.empty() || line == "\r") continue;
    auto f = split_csv(line);
    if (f.size() != 5)
      throw std::invalid_argument(origin + ":" + std::to_string(line_no) + ": expected 5 columns, got " +
                                  std::to_string(f.size()));
    ProfileRow r;
    r.stage = number<int>(f[0], origin, line_no, "stage");
    r.instruction = f[1];
    r.sm_mhz = number<int>(f[2], origin, line_no, "frequency");
    r.time_s = number<double>(f[3], origin, line_no, "time");
    r.energy_j = number<double>(f[4], origin, line_no, "energy");
    rows.push_back(std::move(r));
  }
  if (line_no == 0) throw std::invalid_argument(origin + ": empty file");
  return rows;
}

std::vector<ProfileRow> read_perseus_profile(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  if (!f) throw std::runtime_error("cannot open " + path);
  std::ostringstream ss;
  ss << f.rdbuf();
  return parse_perseus_profile(ss.str(), path);
}

std::string ProfileGroup::label() const {
  if (stages.size() == 1) return "stage " + std::to_string(stages.front()) + " " + instruction;
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
  return s + " " + instruction;
}

std::vector<ProfileGroup> distinct_groups(const std::vector<ProfileRow>& rows, int mem_mhz) {
  // (stage, forward-first rank) -> samples in file order, then sorted by clock.
  std::map<std::pair<int, int>, ProfileGroup> by_key;
  for (const auto& r : rows) {
    auto& g = by_key[{r.stage, r.instruction == "forward" ? 0 : 1}];
    g.stages = {r.stage};
    g.instruction = r.instruction;
    g.samples.push_back({r.sm_mhz, mem_mhz, r.time_s, r.energy_j});
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

}  // namespace gearshift::model
