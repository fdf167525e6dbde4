#include "service/plan_pipeline.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>

#include <fmt/format.h>

#include "pipeline/error.hpp"
#include "service/error.hpp"

namespace gearshift::service {

using Kind = ServiceError::Kind;

PipelineJobResult run_pipeline_job(const PipelineJobOptions& o) {
  using namespace pipeline;
  auto bad = [](const char* what) { throw ServiceError(Kind::kBadArgument, what); };
  if (!(o.time_unit_ms > 0) || !std::isfinite(o.time_unit_ms)) bad("--time-unit-ms must be > 0");
  if (!(o.blocking_power_w >= 0) || !std::isfinite(o.blocking_power_w)) bad("--blocking-power-w must be ≥ 0");
  if (!(o.straggler >= 1) || !std::isfinite(o.straggler)) bad("--straggler must be ≥ 1");
  if (!(o.deadline_ms >= 0) || !std::isfinite(o.deadline_ms)) bad("--deadline-ms must be ≥ 0");
  if (o.cost_model != "hull" && o.cost_model != "exp-fit") bad("--cost-model must be hull or exp-fit");
  // The frontier's cost grows faster than the instruction count: on a 2-core machine the A100 GPT-3 175B profile
  // at S = 8 took 0.16 s at M = 96, 15 s at M = 1,000 and 116 s at M = 2,000 (held-out inputs, session 28), while
  // M up to 2^20 was accepted. Past kMaxPipelineInstructions the job is refused up front, not run for hours.
  const long long instructions = 2LL * o.stages * o.microbatches * std::max(1, o.virtual_stages);
  if (instructions > kMaxPipelineInstructions)
    throw ServiceError(Kind::kBadArgument,
                       fmt::format("{} stages x {} microbatches{} make {} forward and backward instructions; at most "
                                   "{} are planned (M = 2,000 at S = 8 took 116 s, and the cost grows faster than M)",
                                   o.stages, o.microbatches,
                                   o.virtual_stages > 1 ? fmt::format(" x {} chunks", o.virtual_stages) : "",
                                   instructions, kMaxPipelineInstructions));
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
