#include "service/plan_pipeline.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>

#include <fmt/format.h>

#include "pipeline/error.hpp"
#include "pipeline/frontier_cost.hpp"
#include "service/error.hpp"

namespace gearshift::service {

using Kind = ServiceError::Kind;

PipelineJobResult run_pipeline_job(const PipelineJobOptions& o) {
  using namespace pipeline;
  auto bad = [](const char* what) { throw ServiceError(Kind::kBadArgument, what); };
  if (!(o.time_unit_ms > 0) || !std::isfinite(o.time_unit_ms)) bad("--time-unit-ms must be > 0");
  if (!(o.blocking_power_w >= 0) || !std::isfinite(o.blocking_power_w)) bad("--blocking-power-w must be ≥ 0");
  if (!(o.straggler >= 1) || !std::isfinite(o.straggler)) bad("--straggler must be ≥ 1");
  if (!(o.max_solve_seconds > 0) || !std::isfinite(o.max_solve_seconds)) bad("--max-solve-s must be > 0");
  if (!(o.deadline_ms >= 0) || !std::isfinite(o.deadline_ms)) bad("--deadline-ms must be ≥ 0");
  if (o.cost_model != "hull" && o.cost_model != "exp-fit") bad("--cost-model must be hull or exp-fit");
  PipelineProblem p;
  p.stages = o.stages;
  p.microbatches = o.microbatches;
  p.chunks = o.virtual_stages;
  p.model.unit_s = o.time_unit_ms * 1e-3;
  p.model.blocking_power_w = o.blocking_power_w;
  p.model.kind = o.cost_model == "exp-fit" ? CostModelKind::kExpFit : CostModelKind::kHull;
  try {
    p.schedule = parse_schedule(o.schedule);
    const Profile profile =
        o.profile_text.empty() ? read_profile(o.profile_path) : parse_profile(o.profile_text, o.profile_path);
    // The frontier's cost grows with instructions × time units (frontier_cost.hpp): a job estimated past
    // max_solve_seconds is refused before the work, not run for hours.
    const FrontierCost cost = estimate_frontier_cost(profile, p, o.max_solve_seconds);
    if (cost.seconds() > o.max_solve_seconds)
      throw ServiceError(
          Kind::kBadArgument,
          fmt::format("{} stages x {} microbatches{} make {} instructions and {}{} frontier steps (one per {} ms "
                      "between the slowest and the fastest iteration): an estimated {:.0f} s to plan on a 2-core "
                      "machine, over the {:g} s limit (--max-solve-s); use fewer microbatches, a coarser "
                      "--time-unit-ms or a higher --max-solve-s",
                      o.stages, o.microbatches,
                      o.virtual_stages > 1 ? fmt::format(" x {} chunks", o.virtual_stages) : "", cost.instructions,
                      cost.bound ? "at least " : "", cost.steps, o.time_unit_ms, cost.seconds(),
                      o.max_solve_seconds));
    const auto t0 = std::chrono::steady_clock::now();
    PipelineJobResult r{plan_pipeline(profile, p), {}};
    const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    r.summary = summarise(r.plan, o.straggler, o.deadline_ms * 1e-3);
    r.summary.solve_seconds = secs;
    return r;
  } catch (const PipelineError& e) {
    throw ServiceError(Kind::kBadProfile, e.what());
  }
}

nlohmann::json pipeline_job_json(const PipelineJobResult& r) {
  return {{"summary", pipeline::summary_json(r.plan, r.summary)}, {"schedules", pipeline::schedules_json(r.plan, r.summary)}};
}

}  // namespace gearshift::service
