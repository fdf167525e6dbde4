#include "pipeline/measured_run.hpp"

#include <cmath>
#include <map>

#include <fmt/core.h>
#include <nlohmann/json.hpp>

#include "pipeline/error.hpp"

namespace gearshift::pipeline {

double MeasuredRun::iteration_s() const {
  double t = 0;
  for (const auto& r : ranks) t += r.iteration_s;
  return ranks.empty() ? 0.0 : t / static_cast<double>(ranks.size());
}

double MeasuredRun::energy_j() const {
  double e = 0;
  for (const auto& r : ranks) e += r.energy_j;
  return e;
}

namespace {

using nlohmann::json;

[[noreturn]] void fail_run(const std::string& src, const std::string& what) { throw PipelineError(src + ": " + what); }

double number(const json& v, const std::string& src, const std::string& where) {
  if (!v.is_number()) fail_run(src, where + " is not a number");
  const double x = v.get<double>();
  if (!std::isfinite(x) || x < 0) fail_run(src, fmt::format("{} is {} (a time or energy must be finite and ≥ 0)", where, x));
  return x;
}

const json& run_field(const json& o, const char* name, const std::string& src, const std::string& where) {
  if (!o.is_object() || !o.contains(name)) fail_run(src, fmt::format("{} has no \"{}\"", where, name));
  return o.at(name);
}

// Mean over iterations 1.. of a per-iteration list of numbers.
double mean_after_first(const json& list, const std::string& src, const std::string& where) {
  if (!list.is_array() || list.size() < 2)
    fail_run(src, fmt::format("{} lists {} iterations; 2 or more are needed (the first is warm-up)", where,
                          list.is_array() ? list.size() : 0));
  double s = 0;
  for (std::size_t i = 1; i < list.size(); ++i) s += number(list[i], src, fmt::format("{}[{}]", where, i));
  return s / static_cast<double>(list.size() - 1);
}

// Per-microbatch means over iterations 1.. of [[s per entry] per iteration], `per` entries summed per microbatch.
std::vector<double> per_microbatch(const json& list, std::size_t iterations, int M, int per, const std::string& src,
                                   const std::string& where) {
  if (!list.is_array() || list.size() != iterations)
    fail_run(src, fmt::format("{} lists {} iterations; iter_time lists {}", where, list.is_array() ? list.size() : 0,
                          iterations));
  std::vector<double> out(static_cast<std::size_t>(M), 0.0);
  for (std::size_t i = 1; i < list.size(); ++i) {
    const json& it = list[i];
    if (!it.is_array() || it.size() != static_cast<std::size_t>(M * per))
      fail_run(src, fmt::format("{}[{}] has {} entries; {} expected ({} microbatches)", where, i,
                            it.is_array() ? it.size() : 0, M * per, M));
    for (std::size_t k = 0; k < it.size(); ++k)
      out[k / static_cast<std::size_t>(per)] += number(it[k], src, fmt::format("{}[{}][{}]", where, i, k));
  }
  for (double& x : out) x /= static_cast<double>(iterations - 1);
  return out;
}

}  // namespace

MeasuredRun parse_measured_run(const std::string& text, const std::string& src) {
  json j;
  try {
    j = json::parse(text);
  } catch (const json::parse_error& e) {
    fail_run(src, fmt::format("not JSON ({})", e.what()));
  }
  if (!j.is_array() || j.empty())
    fail_run(src, "expected a Perseus prof.json: a non-empty list of {\"rank\", \"iter_time\", \"iter_energy\", "
              "\"time_breakdown\"}");
  MeasuredRun run;
  run.source = src;
  std::map<int, MeasuredRank> by_rank;
  for (std::size_t k = 0; k < j.size(); ++k) {
    const std::string where = fmt::format("entry {}", k);
    const json& rk = run_field(j[k], "rank", src, where);
    if (!rk.is_number_integer() || rk.get<int>() < 0) fail_run(src, where + ": \"rank\" is not a rank number");
    const int r = rk.get<int>();
    const std::string at = fmt::format("rank {}", r);
    if (by_rank.count(r)) fail_run(src, at + " is listed twice");
    const json& it = run_field(j[k], "iter_time", src, at);
    MeasuredRank m;
    m.iteration_s = mean_after_first(it, src, at + " iter_time");
    m.energy_j = mean_after_first(run_field(j[k], "iter_energy", src, at), src, at + " iter_energy");
    if (run_field(j[k], "iter_energy", src, at).size() != it.size())
      fail_run(src, at + ": iter_energy and iter_time list different numbers of iterations");
    const json& tb = run_field(j[k], "time_breakdown", src, at);
    const json& fw = run_field(tb, "forward", src, at + " time_breakdown");
    const json& bw = run_field(tb, "backward", src, at + " time_breakdown");
    if (!fw.is_array() || fw.size() < 2 || !fw[1].is_array() || fw[1].empty())
      fail_run(src, at + ": time_breakdown.forward has no microbatches in iteration 1");
    const int M = static_cast<int>(fw[1].size());
    if (run.microbatches && M != run.microbatches)
      fail_run(src, fmt::format("{}: {} forwards per iteration; rank {} has {}", at, M, by_rank.begin()->first,
                            run.microbatches));
    run.microbatches = M;
    m.forward_s = per_microbatch(fw, it.size(), M, 1, src, at + " forward");
    m.backward_s = per_microbatch(bw, it.size(), M, 1, src, at + " backward");
    m.load_s.assign(static_cast<std::size_t>(M), 0.0);
    if (tb.contains("load")) {
      const json& ld = tb.at("load");
      const std::size_t n = ld.is_array() && ld.size() > 1 && ld[1].is_array() ? ld[1].size() : 0;
      if (n % static_cast<std::size_t>(M) != 0 || n == 0)
        fail_run(src, fmt::format("{}: time_breakdown.load[1] has {} entries, not a multiple of {} microbatches", at, n, M));
      m.load_s = per_microbatch(ld, it.size(), M, static_cast<int>(n) / M, src, at + " load");
    }
    run.iterations = static_cast<int>(it.size()) - 1;
    by_rank[r] = std::move(m);
  }
  int expect = 0;
  for (auto& [r, m] : by_rank) {
    if (r != expect) fail_run(src, fmt::format("rank {} is missing (ranks must be 0..{})", expect, by_rank.size() - 1));
    ++expect;
    run.ranks.push_back(std::move(m));
  }
  return run;
}

}  // namespace gearshift::pipeline
