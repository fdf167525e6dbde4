// Helpers of the `gearshift run --auto` tests (run_auto_*_test.cpp): the command line, the environment with the
// simulated GPU's constant power, and the check of the power the plan was calibrated to.
#pragma once

#include <filesystem>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "sim_run.hpp"

namespace gearshift::test {

// ---------------------------------------------------------------------------------------------------------
// `gearshift run --auto` on the synthetic job: 113 kernels per ~51 ms step, a memory-bound Adam phase at its end.
// Jobs that must reach the plan run 110-120 steps (~6 s): the warm-up, planning and the untraced step's
// measurement (1.3 s) take 2-3 s on a loaded 2-core machine, more under ThreadSanitizer.

inline std::vector<std::string> auto_argv(std::vector<std::string> opts, std::vector<std::string> job) {
  std::vector<std::string> a{GEARSHIFT_BINARY, "run", "--auto"};
  a.insert(a.end(), opts.begin(), opts.end());
  a.push_back("--");
  a.push_back(GEARSHIFT_FAKE_JOB);
  a.insert(a.end(), job.begin(), job.end());
  return a;
}

// --auto calibrates its plan to the power the GPU's energy counter measured over the untraced run: the simulated
// GPU draws a constant power that the fake job's steps can be calibrated to (its default, the idle power, cannot:
// RunAuto.RefusesAPowerTheModelCannotReproduce).
struct AutoEnv : SimEnv {
  static constexpr double kPowerW = 400;
  std::filesystem::path out = t.dir / "out.txt", made = t.dir / "auto-plan.json";
  AutoEnv() { env.push_back("GEARSHIFT_SIMGPU_POWER_W=400"); }
  // `gearshift run --auto` (5 % budget, 10 warm-up steps, the plan to `made`, dry run) on the synthetic stand-in
  // job of `steps` steps, `opts` before the others: the exit code; the output in `out`.
  int run_synthetic(const std::string& steps, std::vector<std::string> opts = {}) {
    opts.insert(opts.end(), {"--max-slowdown", "5%", "--warmup-steps", "10", "--plan-output", made.string(),
                             "--dry-run-log", log.string()});
    return run(auto_argv(opts, {"--synthetic", steps}), env, out);
  }
};

// The power the energy counter measured over the window the plan was calibrated to, checked against the simulated
// GPU's 400 W within the bound its line states (read at the counter's ticks: under 1 % over its ~1-2 s window, a
// few % where a loaded machine stretched the waits between reads). Before (plain reads at the window's edges) it
// could be off by up to a tenth, and its line said no bound. Where the template kept its traced step, the plan is
// calibrated to that power spread over the template ("N W, ... within E % (M W over the ... untraced step"): M is
// the counter's.
inline void expect_calibrated_to_the_counters_power(const std::string& o) {
  const std::string anchor = "model calibrated to the measured ";
  const std::size_t at = o.find(anchor);
  ASSERT_NE(at, std::string::npos) << o;
  const std::string line = o.substr(at, o.find('\n', at) - at);
  EXPECT_NE(line.find("read at two of its ticks: within "), std::string::npos) << o;
  const double bound = number_after(line, "read at two of its ticks: within ") / 100;
  EXPECT_GE(bound, 0) << o;
  EXPECT_LT(bound, 0.03) << o;
  const double watts = line.find(" W over the ") != std::string::npos ? number_after(line, " % (")
                                                                       : number_after(line, anchor);
  // + the roundings of the bound (to 0.1 %) and of the power (to 1 W) in the line
  EXPECT_NEAR(watts, AutoEnv::kPowerW, AutoEnv::kPowerW * (bound + 0.0005) + 0.5) << o;
}

}  // namespace gearshift::test
