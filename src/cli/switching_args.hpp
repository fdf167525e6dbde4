// The switching options `gearshift run` and `gearshift replay` share: --switch-latency-ms and --min-interval-ms
// (defaults: the plan's L, and L; service/live_plan.hpp resolves them against the plan).
#pragma once

#include <CLI/CLI.hpp>

#include "service/live_plan.hpp"

namespace gearshift::cli {

struct SwitchingArgs : service::Switching {
  void add_to(CLI::App* cmd);
};

}  // namespace gearshift::cli
