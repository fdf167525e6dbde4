// `gearshift plan --report FILE` (and `demo --report`): the HTML plan report (report/plan_report.hpp) of a job
// already planned; this file only hands the job's results to the report writer.
#pragma once

#include <string>

#include "service/plan_job.hpp"

namespace gearshift::cli {

// Before planning: FILE's directory exists and is writable, and Chart.js is at hand. Throws Exit(kBadInput) with
// what to do otherwise.
void check_report_path(const std::string& path);

// Writes the report of `r` to `path`. Throws Exit(kBadInput) when it cannot be written.
void write_report(const service::PlanJobOptions& o, const service::PlanJobResult& r, const std::string& path);

// This process's command line as a shell would take it back (arguments with spaces or quotes quoted).
std::string own_command_line();

}  // namespace gearshift::cli
