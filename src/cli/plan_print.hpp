// `gearshift plan` / `gearshift demo`'s table on stdout: the planned job (service/plan_job.hpp) in plain words.
#pragma once

#include "service/plan_job.hpp"

namespace gearshift::cli {

void print_report(const service::PlanJobOptions& o, const service::PlanJobResult& r);

}  // namespace gearshift::cli
