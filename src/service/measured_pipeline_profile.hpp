// `gearshift pipeline-profile DIR`: a stage profile for `gearshift pipeline` built from the measured runs of several
// clock plans in DIR (Perseus artifact layout: N.sched.json(.gz) + N.prof.json(.gz) per plan N;
// pipeline/measured_profile.hpp says how: times MEASURED, power fitted from per-rank energies, MODELLED).
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "pipeline/measured_profile.hpp"

namespace gearshift::service {

struct MeasuredProfileOptions {
  std::string dir;             // the plans' folder
  std::vector<int> leave_out;  // plan numbers not to use (e.g. the one to predict)
  int clock_step_mhz = 0;      // > 0: rows on this clock grid between the measured extremes too (interpolated)
};

struct MeasuredProfileResult {
  std::string dir;
  std::vector<int> used, left_out;  // plan numbers
  pipeline::MeasuredProfile profile;
};

// Throws ServiceError: kBadArgument for a --leave-out plan not in DIR; kBadInput for DIR without plans, an unreadable
// or invalid file (its PipelineError's line names it), or plans the profile cannot be built from.
MeasuredProfileResult build_measured_pipeline_profile(const MeasuredProfileOptions& o);

std::string measured_profile_text(const MeasuredProfileResult& r);  // summary (fit, clocks)
nlohmann::json measured_profile_json(const MeasuredProfileResult& r);

}  // namespace gearshift::service
