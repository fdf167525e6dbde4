#include "service/measured_pipeline_profile.hpp"

#include <algorithm>
#include <filesystem>
#include <map>
#include <optional>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "pipeline/error.hpp"
#include "pipeline/plan_formats.hpp"
#include "service/error.hpp"
#include "service/evaluate_pipeline.hpp"

namespace gearshift::service {

namespace {

using Kind = ServiceError::Kind;
namespace fs = std::filesystem;

// "N.prof.json[.gz]" or "N.sched.json[.gz]" (N digits): the plan number and whether it is the prof file. Plain
// string matching: std::regex trips GCC 12's maybe-uninitialized warning under the sanitizers' build.
std::optional<std::pair<int, bool>> plan_file_name(const std::string& f) {
  const std::size_t dot = f.find('.');
  if (dot == 0 || dot == std::string::npos || dot > 9) return std::nullopt;
  for (std::size_t i = 0; i < dot; ++i)
    if (f[i] < '0' || f[i] > '9') return std::nullopt;
  const std::string rest = f.substr(dot + 1);
  for (const bool prof : {true, false}) {
    const std::string stem = prof ? "prof.json" : "sched.json";
    if (rest == stem || rest == stem + ".gz") return std::make_pair(std::stoi(f.substr(0, dot)), prof);
  }
  return std::nullopt;
}

}  // namespace

MeasuredProfileResult build_measured_pipeline_profile(const MeasuredProfileOptions& o) {
  using namespace pipeline;
  std::error_code ec;
  if (!fs::is_directory(o.dir, ec)) throw ServiceError(Kind::kBadInput, o.dir + ": not a directory of measured plans");
  // plan number -> (prof path, sched path)
  std::map<int, std::pair<std::string, std::string>> files;
  for (const auto& entry : fs::directory_iterator(o.dir, ec)) {
    const auto plan = plan_file_name(entry.path().filename().string());
    if (!plan) continue;
    auto& slot = files[plan->first];
    (plan->second ? slot.first : slot.second) = entry.path().string();
  }
  MeasuredProfileResult r;
  r.dir = o.dir;
  for (int n : o.leave_out)
    if (!files.count(n)) throw ServiceError(Kind::kBadArgument, fmt::format("--leave-out {}: no plan {} in {}", n, n, o.dir));
  std::vector<MeasuredPlan> plans;
  for (const auto& [n, paths] : files) {
    if (std::count(o.leave_out.begin(), o.leave_out.end(), n)) {
      r.left_out.push_back(n);
      continue;
    }
    if (paths.first.empty() || paths.second.empty())
      throw ServiceError(Kind::kBadInput, fmt::format("{}: plan {} has {} but no {}", o.dir, n,
                                                      paths.first.empty() ? "a sched.json" : "a prof.json",
                                                      paths.first.empty() ? "prof.json" : "sched.json"));
    MeasuredPlan p;
    p.name = std::to_string(n);
    try {
      p.run = parse_measured_run(read_plan_text(paths.first), paths.first);
      PlanFile pf = parse_plan_file(read_plan_text(paths.second), paths.second);
      if (pf.format != PlanFormat::kPerseusSched || pf.plans.size() != 1)
        throw PipelineError(paths.second + ": not a Perseus sched.json");
      p.schedule = std::move(pf.plans.front());
    } catch (const PipelineError& e) {
      throw ServiceError(Kind::kBadInput, e.what());
    } catch (const ServiceError& e) {
      throw ServiceError(Kind::kBadInput, e.what());
    }
    r.used.push_back(n);
    plans.push_back(std::move(p));
  }
  if (plans.empty()) throw ServiceError(Kind::kBadInput, o.dir + ": no N.prof.json(.gz) + N.sched.json(.gz) plans to use");
  try {
    r.profile = build_measured_profile(plans, o.clock_step_mhz);
  } catch (const PipelineError& e) {
    throw ServiceError(Kind::kBadInput, fmt::format("{}: {}", o.dir, e.what()));
  }
  return r;
}

std::string measured_profile_text(const MeasuredProfileResult& r) {
  const auto& mp = r.profile;
  std::string o = fmt::format("profile from {} measured plans in {}{}\n", r.used.size(), r.dir,
                              r.left_out.empty() ? "" : fmt::format(" (left out: {})", fmt::join(r.left_out, ", ")));
  o += "times MEASURED (mean per stage, instruction, clock; loads counted into the forward they precede); energies "
       "MODELLED: busy power a + b*x + k*x^2 (x = MHz/1000; a, b per stage, k shared) and one blocking power, least squares over the "
       "per-rank iteration energies (forward and backward share a stage's power at a clock)\n";
  o += fmt::format("blocking power {:.2f} W/GPU (fitted)\n", mp.blocking_power_w);
  for (std::size_t s = 0; s < mp.power.size(); ++s)
    o += fmt::format("stage {}: busy power {:.1f} W at 1005 MHz, {:.1f} W at 1200 MHz, {:.1f} W at 1410 MHz\n", s,
                     mp.power[s].at(1005), mp.power[s].at(1200), mp.power[s].at(1410));
  if (!mp.power.empty())
    o += fmt::format("busy power curvature k = {:.2f} W/GHz^2 (all stages)\n", mp.power.front().k_w_per_ghz2);
  o += fmt::format("fit residual: RMS {:.2f} J, largest {:.2f} % of a rank's iteration energy\n", mp.rms_residual_j,
                   mp.max_residual_pct);
  o += fmt::format("{} rows; where a stage did not run a clock{}: {} interpolated between its measured clocks, {} "
                   "extrapolated beyond them\n",
                   mp.profile.rows.size(), mp.interpolated_rows ? " (or no plan did: --clock-step-mhz)" : "",
                   mp.interpolated_rows, mp.extrapolated_rows);
  return o;
}

nlohmann::json measured_profile_json(const MeasuredProfileResult& r) {
  const auto& mp = r.profile;
  nlohmann::json stages = nlohmann::json::array();
  for (std::size_t s = 0; s < mp.power.size(); ++s)
    stages.push_back({{"stage", s},
                      {"a_w", mp.power[s].a_w},
                      {"b_w_per_ghz", mp.power[s].b_w_per_ghz},
                      {"k_w_per_ghz2", mp.power[s].k_w_per_ghz2}});
  return {{"dir", r.dir},
          {"plans_used", r.used},
          {"left_out", r.left_out},
          {"blocking_power_w", mp.blocking_power_w},
          {"busy_power", stages},
          {"rms_residual_j", mp.rms_residual_j},
          {"max_residual_pct", mp.max_residual_pct},
          {"rows", mp.profile.rows.size()},
          {"interpolated_rows", mp.interpolated_rows},
          {"extrapolated_rows", mp.extrapolated_rows},
          {"power_modelled", true},
          {"times_measured", true}};
}

}  // namespace gearshift::service
