// The switching options `gearshift run` and `gearshift replay` share: --switch-latency-ms and --min-interval-ms
// (defaults: the plan's L, and L; service/live_plan.hpp resolves them against the plan).
#pragma once

#include <CLI/CLI.hpp>

#include "service/live_plan.hpp"

namespace gearshift::cli {

// Adds both options to `cmd`, stored in `s` converted to ns (checked finite and in [0, 60 s] when given; not
// given stays none).
void add_switching_options(CLI::App* cmd, service::Switching& s);

// A validator for a finite number in [lo, hi]: CLI::Range lets NaN through (every comparison with it is false),
// and `replay --cpu-lead-ms nan` then ran on past 120 s; a latency of 1e12 ms stepped through virtual time for
// as long. Times of a training step's scale are bounded by a minute (kMaxOptionMs).
inline constexpr double kMaxOptionMs = 60'000;
CLI::Validator finite_range(double lo, double hi);

}  // namespace gearshift::cli
