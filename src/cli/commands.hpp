// Each `gearshift` subcommand registers itself on the CLI11 app; main.cpp lists them.
// A command's callback returns through throwing gearshift::cli::Exit or returning normally (exit 0).
#pragma once

#include <cstdint>
#include <stdexcept>
#include <string>

#include <CLI/CLI.hpp>

namespace gearshift::cli {

// Documented exit codes (README "Exit codes").
enum ExitCode : int {
  kOk = 0,
  kFailure = 1,       // unexpected internal error
  kUsage = 2,         // bad command line (CLI11 parse errors too)
  kBadInput = 3,      // unreadable or invalid input file (trace, profile, plan, spec)
  kNoIteration = 4,   // the trace holds no repeating iteration to plan for
  kNoGpu = 5,         // NVML or GPU unavailable
  kNoPermission = 6,  // the user may not do what was asked (e.g. lock clocks)
  kModelRefused = 7,  // the model cannot reproduce the trace's measurement: no plan (right or refused)
};

// Thrown by a command to end with a one-line message and an exit code (no message printed when empty:
// `monitor` passes on its command's exit code this way).
// A duration option given in s (> 0, checked by CLI11) as ns, saturating past ~292 years.
inline std::int64_t seconds_to_ns(double s) { return s >= 9.2e9 ? INT64_MAX : static_cast<std::int64_t>(s * 1e9); }

struct Exit : std::runtime_error {
  Exit(int code_, const std::string& message) : std::runtime_error(message), code(code_) {}
  int code;
};

void add_plan_command(CLI::App& app);
void add_demo_command(CLI::App& app);
void add_gpus_command(CLI::App& app);
void add_monitor_command(CLI::App& app);
void add_pipeline_command(CLI::App& app);
void add_pipeline_profile_command(CLI::App& app);
void add_trace_command(CLI::App& app);
void add_replay_command(CLI::App& app);
void add_run_command(CLI::App& app);
void add_plan_ranks_command(CLI::App& app);
void add_calibrate_command(CLI::App& app);
void add_validate_model_command(CLI::App& app);

}  // namespace gearshift::cli
