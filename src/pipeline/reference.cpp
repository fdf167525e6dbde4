#include "pipeline/reference.hpp"

#include <algorithm>
#include <cmath>
#include <fstream>
#include <limits>
#include <map>
#include <sstream>

#include <fmt/core.h>

#include "pipeline/error.hpp"

namespace gearshift::pipeline {

Curve read_curve_csv(const std::string& path) {
  std::ifstream f(path);
  if (!f) throw PipelineError(path + ": cannot open");
  std::string line;
  Curve c;
  int lineno = 0;
  while (std::getline(f, line)) {
    ++lineno;
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (lineno == 1) {
      if (line != "time,energy") throw PipelineError(fmt::format("{}: row 1: header must be 'time,energy'", path));
      continue;
    }
    if (line.empty()) continue;
    auto comma = line.find(',');
    char* e1 = nullptr;
    char* e2 = nullptr;
    double t = comma == std::string::npos ? NAN : std::strtod(line.c_str(), &e1);
    double e = comma == std::string::npos ? NAN : std::strtod(line.c_str() + comma + 1, &e2);
    if (!std::isfinite(t) || !std::isfinite(e) || e1 != line.c_str() + comma || *e2 != '\0')
      throw PipelineError(fmt::format("{}: row {}: expected two numbers, got '{}'", path, lineno, line));
    c.emplace_back(t, e);
  }
  return c;
}

Curve frontier_rows(const Frontier& f) {
  Curve c;
  for (std::size_t k = 1; k < f.points.size(); ++k) c.emplace_back(f.time_s(k), f.points[k].energy_j);
  return c;
}

LevelA compare_level_a(const Curve& ours, const Curve& ref, double unit_s) {
  LevelA a;
  a.rows_ours = ours.size();
  a.rows_ref = ref.size();
  auto T = [&](double t) { return std::lround(t / unit_s); };
  std::map<long, double> by_t;
  for (auto [t, e] : ours) by_t[T(t)] = e;
  for (auto [t, e] : ref) {
    auto it = by_t.find(T(t));
    if (it == by_t.end()) {
      ++a.unmatched;
      continue;
    }
    a.max_r = std::max(a.max_r, std::abs(it->second - e) / e);
  }
  if (!ours.empty() && !ref.empty()) {
    a.first_matches = T(ours.front().first) == T(ref.front().first);
    a.last_matches = T(ours.back().first) == T(ref.back().first);
  }
  return a;
}

namespace {
// Staircase: (time ascending, running-minimum energy).
std::vector<std::pair<double, double>> staircase(Curve c) {
  std::sort(c.begin(), c.end());
  double m = std::numeric_limits<double>::infinity();
  for (auto& [t, e] : c) {
    m = std::min(m, e);
    e = m;
  }
  return c;
}
double eval(const std::vector<std::pair<double, double>>& s, double t) {
  auto it = std::upper_bound(s.begin(), s.end(), std::make_pair(t + 1e-9, std::numeric_limits<double>::infinity()));
  return it == s.begin() ? std::numeric_limits<double>::infinity() : std::prev(it)->second;
}
}  // namespace

LevelB compare_level_b(const Curve& ours, const Curve& ref) {
  LevelB b;
  auto so = staircase(ours), sr = staircase(ref);
  if (so.empty()) return b;
  double sum = 0;
  b.min_r = std::numeric_limits<double>::infinity();
  b.max_r = -std::numeric_limits<double>::infinity();
  for (auto [t, e] : ref) {
    (void)e;
    if (t + 1e-9 < so.front().first) {
      ++b.uncovered;
      continue;
    }
    double r = (eval(so, t) - eval(sr, t)) / eval(sr, t);
    ++b.compared;
    sum += r;
    b.min_r = std::min(b.min_r, r);
    b.max_r = std::max(b.max_r, r);
    b.max_abs_r = std::max(b.max_abs_r, std::abs(r));
  }
  if (b.compared) b.mean_r = sum / static_cast<double>(b.compared);
  else b.min_r = b.max_r = 0;
  return b;
}

}  // namespace gearshift::pipeline
