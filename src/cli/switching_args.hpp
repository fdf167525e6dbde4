// The switching options `gearshift run` and `gearshift replay` share: --switch-latency-ms and --min-interval-ms
// (defaults: the plan's L, and L; service/live_plan.hpp resolves them against the plan).
#pragma once

#include <CLI/CLI.hpp>

#include "service/live_plan.hpp"

namespace gearshift::cli {

// Adds both options to `cmd`, stored in `s` converted to ns (checked >= 0 when given; not given stays none).
void add_switching_options(CLI::App* cmd, service::Switching& s);

}  // namespace gearshift::cli
