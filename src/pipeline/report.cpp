#include "pipeline/report.hpp"

#include <limits>

#include <fmt/core.h>

#include "pipeline/error.hpp"

namespace gearshift::pipeline {

std::string frontier_csv(const Frontier& f, bool pareto_only) {
  std::string out = "time,energy\n";
  // Walking from T_min upward, a row is Pareto-optimal when it is cheaper than every faster row.
  std::vector<char> keep(f.points.size(), 1);
  if (pareto_only) {
    double best = std::numeric_limits<double>::infinity();
    for (std::size_t k = f.points.size(); k-- > 0;) {
      keep[k] = f.points[k].energy_j < best;
      if (keep[k]) best = f.points[k].energy_j;
    }
  }
  // The reference layout omits the all-slowest start; the Pareto list keeps it when it is optimal.
  for (std::size_t k = pareto_only ? 0 : 1; k < f.points.size(); ++k)
    if (keep[k]) out += fmt::format("{},{}\n", f.time_s(k), f.points[k].energy_j);
  return out;
}

namespace {

double rounding_extra(const PipelinePlan& plan, const std::vector<int>& d) {
  double extra = 0;
  for (std::size_t i = 0; i < d.size(); ++i) extra += plan.model_of(static_cast<int>(i)).realise(d[i]).rounded_extra_j;
  return extra;
}

SummaryRow row_for(const PipelinePlan& plan, const std::string& name, double deadline_s) {
  auto sel = select_for_deadline(plan, deadline_s);
  if (!sel)
    throw PipelineError(fmt::format("deadline {} s is below the fastest modelled iteration ({} s)", deadline_s,
                                    plan.frontier.time_s(plan.frontier.points.size() - 1)));
  SummaryRow r;
  r.name = name;
  r.deadline_s = deadline_s;
  r.point = sel->point;
  r.plan_time_s = plan.frontier.time_s(sel->point);
  r.energy_j = sel->energy_j;
  r.baseline_j = sel->baseline_j;
  r.saving = sel->saving();
  r.rounding_extra_j = rounding_extra(plan, plan.frontier.durations_at(sel->point));
  return r;
}

}  // namespace

Summary summarise(const PipelinePlan& plan, double straggler, double deadline_s) {
  const auto& f = plan.frontier;
  Summary s;
  s.t_max_s = f.time_s(0);
  s.t_min_s = f.time_s(f.points.size() - 1);
  s.steps = f.points.size() - 1;
  double best = std::numeric_limits<double>::infinity();
  for (std::size_t k = f.points.size(); k-- > 0;) {
    if (f.points[k].energy_j < best) {
      best = f.points[k].energy_j;
      ++s.pareto_points;
      s.min_energy_j = best;
      s.min_energy_time_s = f.time_s(k);
    }
  }
  s.dropped_dominated = plan.models.dropped_dominated();
  s.dropped_same_q = plan.models.dropped_same_q();
  s.rows.push_back(row_for(plan, "no_slowdown", s.t_min_s));
  s.rows.push_back(row_for(plan, "slowdown_1pct", s.t_min_s * 1.01));
  s.rows.push_back(row_for(plan, "straggler", s.t_min_s * straggler));
  if (deadline_s > 0) s.rows.push_back(row_for(plan, "deadline", deadline_s));
  return s;
}

std::string summary_text(const PipelinePlan& plan, const Summary& s) {
  const auto& p = plan.problem;
  std::string o;
  o += fmt::format("pipeline {} S={} M={} v={}  cost model {}  unit {} ms  blocking {} W/GPU\n",
                   schedule_name(p.schedule), p.stages, p.microbatches, p.chunks,
                   p.model.kind == CostModelKind::kHull ? "hull" : "exp-fit", p.model.unit_s * 1e3,
                   p.model.blocking_power_w);
  o += fmt::format("All energies below are MODELLED from the profile, per iteration of one pipeline of {} GPUs.\n",
                   plan.frontier.gpus);
  o += fmt::format("frontier: {} steps, T {:.4f} s .. {:.4f} s, {} Pareto-optimal points; min energy {:.2f} J at "
                   "{:.4f} s\n",
                   s.steps, s.t_max_s, s.t_min_s, s.pareto_points, s.min_energy_j, s.min_energy_time_s);
  o += fmt::format("profile options dropped: {} dominated, {} same quantized time\n", s.dropped_dominated,
                   s.dropped_same_q);
  o += "point           deadline_s  plan_time_s   energy_J  all-fastest_J  saving   single-clock rounding\n";
  for (const auto& r : s.rows)
    o += fmt::format("{:<15} {:>10.4f}  {:>11.4f}  {:>9.2f}  {:>13.2f}  {:>5.2f} %  {:+.2f} J ({:+.3f} %)\n", r.name,
                     r.deadline_s, r.plan_time_s, r.energy_j, r.baseline_j, 100 * r.saving, r.rounding_extra_j,
                     100 * r.rounding_extra_j / r.energy_j);
  o += fmt::format("solver wall time {:.3f} s (measured)\n", s.solve_seconds);
  return o;
}

nlohmann::json summary_json(const PipelinePlan& plan, const Summary& s) {
  const auto& p = plan.problem;
  nlohmann::json j;
  j["modelled"] = true;
  j["schedule"] = schedule_name(p.schedule);
  j["stages"] = p.stages;
  j["microbatches"] = p.microbatches;
  j["virtual_stages"] = p.chunks;
  j["cost_model"] = p.model.kind == CostModelKind::kHull ? "hull" : "exp-fit";
  j["time_unit_s"] = p.model.unit_s;
  j["blocking_power_w"] = p.model.blocking_power_w;
  j["steps"] = s.steps;
  j["pareto_points"] = s.pareto_points;
  j["t_min_s"] = s.t_min_s;
  j["t_max_s"] = s.t_max_s;
  j["min_energy_j"] = s.min_energy_j;
  j["min_energy_time_s"] = s.min_energy_time_s;
  j["dropped_dominated_options"] = s.dropped_dominated;
  j["dropped_same_time_options"] = s.dropped_same_q;
  j["solve_seconds"] = s.solve_seconds;
  for (const auto& r : s.rows)
    j["points"].push_back({{"name", r.name},
                           {"deadline_s", r.deadline_s},
                           {"plan_time_s", r.plan_time_s},
                           {"energy_j", r.energy_j},
                           {"baseline_energy_j", r.baseline_j},
                           {"saving", r.saving},
                           {"single_clock_rounding_extra_j", r.rounding_extra_j}});
  return j;
}

nlohmann::json schedules_json(const PipelinePlan& plan, const Summary& s) {
  nlohmann::json j = summary_json(plan, s);
  j.erase("points");
  const double u = plan.frontier.unit_s;
  for (const auto& r : s.rows) {
    auto d = plan.frontier.durations_at(r.point);
    nlohmann::json pj = {{"name", r.name},         {"deadline_s", r.deadline_s}, {"iteration_time_s", r.plan_time_s},
                         {"energy_j", r.energy_j}, {"saving", r.saving},         {"ranks", nlohmann::json::array()}};
    for (int rank = 0; rank < plan.dag.stages; ++rank) {
      nlohmann::json ins = nlohmann::json::array();
      for (int op : plan.dag.rank_order[static_cast<std::size_t>(rank)]) {
        const auto& o = plan.dag.ops[static_cast<std::size_t>(op)];
        auto real = plan.model_of(op).realise(d[static_cast<std::size_t>(op)]);
        nlohmann::json x = {{"instruction", instruction_name(o.instruction)},
                            {"microbatch", o.microbatch},
                            {"chunk", o.chunk},
                            {"duration_s", d[static_cast<std::size_t>(op)] * u},
                            {"sm_clock_mhz", real.rounded_clock_mhz}};
        if (real.fast_fraction > 0)
          x["split"] = {{"fast_mhz", real.fast_clock_mhz},
                        {"slow_mhz", real.slow_clock_mhz},
                        {"fast_fraction", real.fast_fraction}};
        ins.push_back(std::move(x));
      }
      pj["ranks"].push_back({{"rank", rank}, {"instructions", std::move(ins)}});
    }
    j["plans"].push_back(std::move(pj));
  }
  return j;
}

}  // namespace gearshift::pipeline
