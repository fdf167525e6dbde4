// `gearshift run --auto`, its last stages: the plan from the first steps and its application and guards
// (service/auto_plan.cpp: plan, apply_checked, apply): step variants, plans of one pair, the in-time fall-back, the
// cautions said with the plan, a GPU another process shares, usage errors.
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "auto_env.hpp"
#include "sim_run.hpp"

namespace {

namespace fs = std::filesystem;
using namespace gearshift::test;

TEST(RunAuto, PlansFromTheFirstStepsThenApplies) {
  AutoEnv s;
  const fs::path out = s.t.dir / "out.txt", made = s.t.dir / "auto-plan.json", control = s.t.dir / "control.txt";
  s.env.push_back("FAKE_JOB_CONTROL_LOG=" + control.string());
  ASSERT_EQ(run(auto_argv({"--max-slowdown", "5%", "--warmup-steps", "10", "--apply", "--plan-output", made.string(),
                           "--dry-run-log", s.log.string()},
                          {"--synthetic", "120"}),
                s.env, out),
            0)
      << slurp(out);
  const std::string o = slurp(out);
  EXPECT_GE(number_before(o, " steps detected by"), 10) << o;
  EXPECT_EQ(number_after(o, " (", "steps detected by"), 113) << o;
  EXPECT_NE(o.find("plan for h200"), std::string::npos) << o;  // from the simulated GPU's NVML name
  EXPECT_NE(o.find("live check passed: modelled step"), std::string::npos) << o;
  EXPECT_GT(number_after(o, "MODELLED saving "), 0) << o;
  // What that saving rests on, in parts that add up to it (sim/saving_parts.hpp).
  EXPECT_NE(o.find("gearshift run --auto: the saving rests on: busy kernels' clocks "), std::string::npos) << o;
  {
    const double parts = number_after(o, "rests on: busy kernels' clocks ") + number_after(o, "%, waits ", "rests on:") +
                         number_after(o, "board idle power ", "rests on:");
    EXPECT_NEAR(parts, number_after(o, "MODELLED saving "), 0.02) << o;  // each rounded to 0.01
  }
  // How likely the plan overruns its budget, beside its saving (plan.json's predicted.p_over_budget, in %).
  const double p_over = number_after(o, "(P(step time over the budget) ", "MODELLED saving");
  EXPECT_GE(p_over, 0) << o;
  EXPECT_LE(p_over, 100) << o;
  EXPECT_NE(o.find(" %, 200 draws of the class priors' spread)"), std::string::npos) << o;
  EXPECT_GT(number_after(o, "clock changes ", "\n  steps "), 0) << o;
  EXPECT_GE(number_after(o, "prediction accuracy after the first step "), 99.0) << o;
  EXPECT_GE(number_after(o, "  steps "), 10) << o;
  EXPECT_NE(o.find("applied (NVML)"), std::string::npos) << o;
  // --auto's plan is verified on the job as --plan's is (service/verify_run.hpp), with --auto's own budget.
  EXPECT_NE(o.find("measured verification (applied: plan and baseline blocks alternate on the GPU; budget 5.00 %"),
            std::string::npos)
      << o;
  // The simulated GPU's energy counter, read while live: J per step beside the modelled figures.
  EXPECT_NE(o.find("GPU 0 energy while live (measured, NVML energy counter): "), std::string::npos) << o;
  EXPECT_GT(number_after(o, " W, ", "energy while live"), 0) << o;  // "... J per step over N steps"
  // Every kernel's activity while collecting (nothing in the job's environment), none while the untraced step is
  // measured, then markers and sampled activity once planned; for a plan of one pair (see below) markers until it
  // is set and no sampled activity.
  // A loaded machine can make the in-time guard fall back (2-core runs with 3 copies at once: at step 30, 76.9 %):
  // from then on sampling stops and markers stop at the next anchor, as for a plan of one pair.
  const std::string c = slurp(control);
  if (o.find("in-time guard: none: the plan is one clock pair") != std::string::npos)
    EXPECT_EQ(c, "A 5000 0\nM 5000\nM 0\n") << o;
  else if (o.find("in-time guard: FELL BACK at step ") == std::string::npos)
    EXPECT_EQ(c, "A 5000 0\nM 5000\nA 5000 200\n") << o;
  else
    EXPECT_TRUE(c == "A 5000 0\nM 5000\nA 5000 200\nA 5000 0\n" || c == "A 5000 0\nM 5000\nA 5000 200\nA 5000 0\nM 0\n")
        << c << o;
  // The fake job runs as fast untraced (52.43 ms a step): the warm-up's timing holds. Only a machine load that
  // slowed the untraced run itself past the 4 % re-time bound may re-time it (a clean-clone CI run on 2 cores
  // measured 55.46 ms untraced against a 52.87 ms template); a template too short would show an untraced step
  // near 52.43 ms here.
  if (o.find(": the warm-up's timing holds") == std::string::npos) {
    EXPECT_GT(number_after(o, "untraced step "), 52.43 * 1.04) << o;
  }
  // The plan applied passed the in-time check: replayed on the warm-up's own steps, its changes landed in time
  // (the attempts before plan without it; the applied plan is made again with it).
  EXPECT_NE(o.find("gearshift run --auto: in-time check (replay of the trace's first"), std::string::npos) << o;
  // The fake job reports every completion: each change boundary's kernel start is compared with its estimate.
  // Unless a loaded machine jittered the warm-up's steps so that every rung replayed below the target: then the
  // plan taken is the one pair, with no change boundary to time (a fresh clone's `make test`, session 18).
  if (o.find("taken one clock pair for the whole step") == std::string::npos) {
    EXPECT_GT(number_before(o, " change boundaries timed by kernel activity"), 10) << o;
    EXPECT_LT(std::fabs(number_after(o, "issued for median ")), 2.0) << o;  // ms
    EXPECT_GE(number_after(o, " ms: ", "in-time check (replay"), 95.0) << o;
  }
  // The feed's trace holds the job's synchronizes (S lines): the in-time replay anchors on them, and the model
  // places the stand-in's one synchronize a step, so no caution that the saving is an upper bound follows the plan
  // line (before, the trace held none: "anchored on one synchronize assumed at each step's end", and the caution).
  EXPECT_GE(number_after(o, "steps, anchored on the job's "), 10) << o;
  EXPECT_EQ(o.find("caution: the job synchronized "), std::string::npos) << o;

  // The plan written is the one `gearshift run --plan` reads.
  auto j = nlohmann::json::parse(slurp(made));
  EXPECT_EQ(j["format"], "gearshift-plan");
  EXPECT_EQ(j["gpu"], "h200");
  EXPECT_EQ(j["positions"].size(), 113u);
  EXPECT_EQ(j["positions"][112]["name"], "multi_tensor_apply_kernel<AdamFunctor>");
  EXPECT_EQ(j["positions"][0]["stream"], 7);  // the extended completion line's stream reached the plan
  EXPECT_GT(j["predicted"]["saving_pct"].get<double>(), 0);
  EXPECT_LE(j["predicted"]["slowdown_pct"].get<double>(), 5.0);

  // Clocks were really written on the simulated GPU, and reset at the end.
  auto log = s.clocklog();
  ASSERT_FALSE(log.empty());
  EXPECT_TRUE(std::any_of(log.begin(), log.end(), [](const std::string& l) { return l.find("set-sm") != std::string::npos; }));
  EXPECT_NE(log.back().find("reset-sm"), std::string::npos);
}

// Megatron-LM clips its gradients only in the iterations whose norm exceeds the clip: two step variants, one 292
// kernels longer, then an optimizer of repeated multi-tensor kernels where no search can relock. Live on an H200
// the predictor lost lock in every iteration of the variant the template lacked (prediction 79.6 and 85.2 %,
// default clocks while searching). Here every third step launches 16 more kernels after the backward pass: the
// plan carries the variant the warm-up saw, and the predictor follows both.
TEST(RunAuto, FollowsTheStepVariantsItSawInTheWarmUp) {
  AutoEnv s;
  s.env.push_back("FAKE_JOB_VARIANT=3:16:72");
  ASSERT_EQ(s.run_synthetic("140"), 0) << slurp(s.out);
  const std::string o = slurp(s.out);
  EXPECT_NE(o.find("live check passed"), std::string::npos) << o;
  const double kernels = number_after(o, " (", "steps detected by");
  EXPECT_EQ(kernels, 113) << o;  // the commoner step
  auto j = nlohmann::json::parse(slurp(s.made));
  ASSERT_TRUE(j.contains("variants")) << j.dump().substr(0, 400);
  ASSERT_EQ(j["variants"].size(), 1u) << j["variants"].dump();
  const auto& v = j["variants"][0];
  EXPECT_EQ(v["after"], 72);
  ASSERT_EQ(v["ops"].size(), 16u);
  EXPECT_EQ(v["ops"][0]["name"], "clip_scale_kernel");
  EXPECT_GE(v["steps"].get<int>(), 2);
  EXPECT_GE(number_after(o, "prediction accuracy after the first step "), 99.0) << o;
}

// A switch latency of four steps leaves one clock pair for the whole step: no in-time guard (nothing can land
// late), markers only until the runtime has set the pair, no sampled kernel activity.
TEST(RunAuto, APlanOfOnePairFollowsTheJobOnlyUntilItsPairIsSet) {
  AutoEnv s;
  const fs::path control = s.t.dir / "control.txt";
  s.env.push_back("FAKE_JOB_CONTROL_LOG=" + control.string());
  ASSERT_EQ(s.run_synthetic("120", {"--switch-latency-ms", "200"}), 0) << slurp(s.out);
  const std::string o = slurp(s.out);
  EXPECT_NE(o.find("1 phases, 0 clock changes per step; MODELLED saving "), std::string::npos) << o;
  EXPECT_NE(o.find("in-time guard: none: the plan is one clock pair for the whole step"), std::string::npos) << o;
  EXPECT_EQ(o.find("  in-time guard: "), std::string::npos) << o;  // no guard, no outcome
  EXPECT_EQ(slurp(control), "A 5000 0\nM 5000\nM 0\n") << o;  // collect, stop, markers, markers off
  EXPECT_NE(o.find("(markers stopped once the runtime held an anchor and had set the pair); no kernel activity "
                   "sampled: the plan is one clock pair for the whole step (SM "),
            std::string::npos)
      << o;
  EXPECT_GE(number_after(o, "clock changes ", "\n  steps "), 1) << o;  // the pair set
  EXPECT_GE(number_after(o, "prediction accuracy after the first step "), 99.0) << o;
}

// Where the in-time guard falls back to one clock pair, the plan has nothing left to time: the job is followed as
// one of one pair from then on: its sampled activity stopped at once, its markers at the next anchor, its feed
// turned off once the pair was followed (--one-pair-follow-s). FAKE_JOB_COMPLETION_SHIFT_US makes every completion
// say its kernel ran 15 ms later than it did, so the plan's changes land at other kernels than planned. Before,
// the job kept its markers, sampled windows and callbacks to its end (H200: Llama, accumulation, session 19).
TEST(RunAuto, AFallBackToOnePairIsFollowedAsAPlanOfOnePair) {
  AutoEnv s;
  const fs::path control = s.t.dir / "control.txt";
  s.env.insert(s.env.end(), {"FAKE_JOB_COMPLETION_SHIFT_US=15000", "FAKE_JOB_CONTROL_LOG=" + control.string()});
  ASSERT_EQ(s.run_synthetic("200", {"--one-pair-follow-s", "0.5"}), 0) << slurp(s.out);
  const std::string o = slurp(s.out);
  if (o.find("taken one clock pair for the whole step") != std::string::npos)
    GTEST_SKIP() << "the plan taken was one pair (a loaded machine jittered the warm-up's steps): no guard to fall back";
  ASSERT_NE(o.find("in-time guard: FELL BACK at step "), std::string::npos) << o;
  EXPECT_LT(number_after(o, "in-time guard: FELL BACK at step "), 200) << o;
  // The window that made it: its kernels 15 ms off their phases (the plan's phases are longer: about 70 %).
  EXPECT_LT(number_after(o, ": ", "FELL BACK at step "), 95) << o;
  EXPECT_GT(number_after(o, ": ", "FELL BACK at step "), 0) << o;
  EXPECT_NE(o.find("until the in-time guard fell back to one clock pair for the whole step"), std::string::npos) << o;
  EXPECT_NE(o.find(", none after it: no change inside the step can be late since"), std::string::npos) << o;
  EXPECT_NE(o.find("; the launch feed was turned off at step "), std::string::npos) << o;
  // Kernel time after the fall-back is said only from two steps' kernel time sampled or more (the fake job's 200 ms
  // windows hold about four steps: all at the pair), not from a window in flight when sampling stopped (before:
  // "81.07 % after" on Megatron-LM, "41.59 %" on the MoE, a fraction of a step each; H200 session 24).
  const std::size_t guard = o.find("in-time guard: FELL BACK");
  const std::string guard_line = o.substr(guard, o.find('\n', guard) - guard);
  EXPECT_TRUE(guard_line.find(" % before, 100.00 % after") != std::string::npos ||
              guard_line.find(" % before, not measured") != std::string::npos)
      << guard_line;
  // Every kernel while collecting, none while the untraced step is measured, markers and sampling once planned;
  // at the fall-back no sampling, at the next anchor no markers, then the feed off.
  EXPECT_EQ(slurp(control), "A 5000 0\nM 5000\nA 5000 200\nA 5000 0\nM 0\nO\n") << o;
}

TEST(RunAuto, AStepTheJobsSynchronizesDoNotRecurInIsNeverPlanned) {
  AutoEnv s;
  const fs::path out = s.t.dir / "out.txt";
  s.env.push_back("FAKE_JOB_SYNC_DRIFT_US=13000");  // a quarter of the ~51 ms step further each step
  EXPECT_EQ(run(auto_argv({"--max-slowdown", "5%", "--warmup-steps", "10", "--dry-run-log", s.log.string()},
                          {"--synthetic", "40"}),
                s.env, out),
            0);
  const std::string o = slurp(out);
  EXPECT_NE(o.find("the live check failed: only "), std::string::npos) << o;
  EXPECT_NE(o.find("learning on"), std::string::npos) << o;
  EXPECT_NE(o.find("last step found: "), std::string::npos) << o;
  EXPECT_EQ(o.find("MODELLED saving"), std::string::npos) << o;  // no saving reported for a refused step
  EXPECT_EQ(o.find("applying the plan"), std::string::npos) << o;
  EXPECT_EQ(slurp(s.log), "");
}

// The plan is calibrated to the untraced run's measured power (the NVML energy counter over the window in which
// the untraced step was measured), and says so; before, --auto planned with the priors' power (on an H200: 37.7 %
// modelled on a job whose calibrated offline plan said 9.4 %).
// Steps that call 1, 2 and 3 synchronizes in turn: the template places none (trace/cpu_timeline.hpp: no count
// is most steps'), so the plan line is followed by the caution that its MODELLED step time is a lower bound and
// its saving an upper bound. The plan is still made: a "say so", not a refusal.
TEST(RunAuto, CautionsWhereTheStepsSynchronizesCannotBePlaced) {
  AutoEnv s;
  s.env.push_back("FAKE_JOB_SYNCS_CYCLE=3");
  ASSERT_EQ(s.run_synthetic("110"), 0) << slurp(s.out);
  const std::string o = slurp(s.out);
  EXPECT_NE(o.find("MODELLED saving"), std::string::npos) << o;
  // 2 a step (1 + s % 3); the last step's may return after the steps detected.
  EXPECT_GE(number_after(o, "caution: the job synchronized "), 1.5) << o;
  EXPECT_LE(number_after(o, "caution: the job synchronized "), 2.1) << o;
  EXPECT_NE(o.find("the regular steps call different numbers of synchronizes"), std::string::npos) << o;
  EXPECT_NE(o.find("so the MODELLED step time is a lower bound and the saving an upper bound"), std::string::npos) << o;
}

// Two processes on one GPU, both launching kernels while the untraced step is measured (two data-parallel ranks
// sharing a GPU, measured on an H200 through torchrun): a plan of one would set the clocks of both. Refused.
TEST(RunAuto, RefusesAGpuWhoseClocksAnotherBusyProcessShares) {
  AutoEnv s;
  const fs::path out = s.t.dir / "out.txt";
  const std::string job = GEARSHIFT_FAKE_JOB;
  EXPECT_EQ(run({GEARSHIFT_BINARY, "run", "--auto", "--max-slowdown", "5%", "--warmup-steps", "10", "--dry-run-log",
                 s.log.string(), "--", "sh", "-c",
                 "RANK=0 " + job + " --synthetic 100 & RANK=1 " + job + " --noise 12 & wait"},
                s.env, out),
            0)
      << slurp(out);
  const std::string o = slurp(out);
  EXPECT_NE(o.find("kernels on the run's GPU while the planned one launched"), std::string::npos) << o;
  EXPECT_NE(o.find("a plan of one process would set the clocks of all"), std::string::npos) << o;
  EXPECT_EQ(o.find("MODELLED saving"), std::string::npos) << o;
  EXPECT_EQ(slurp(s.log), "");
}

TEST(RunAuto, UsageErrorsBeforeTheJobStarts) {
  SimEnv s;
  const fs::path out = s.t.dir / "out.txt", marker = s.t.dir / "job-ran";
  auto try_run = [&](std::vector<std::string> opts) {
    std::vector<std::string> a{GEARSHIFT_BINARY, "run"};
    a.insert(a.end(), opts.begin(), opts.end());
    a.insert(a.end(), {"--dry-run-log", s.log.string(), "--", "sh", "-c", "touch " + marker.string()});
    return run(a, s.env, out);
  };
  struct Case {
    std::vector<std::string> opts;
    std::string message;
  };
  const Case cases[] = {
      {{"--auto", "--max-slowdown", "abc"}, "--max-slowdown 'abc' is not a number"},
      {{"--auto", "--max-slowdown", "150%"}, "must lie between 0% and 100%"},
      {{"--auto"}, "--auto needs --max-slowdown"},
      {{"--auto", "--max-slowdown", "1%", "--plan", s.plan.string()}, "--plan and --auto exclude each other"},
      {{"--auto", "--max-slowdown", "1%", "--warmup-steps", "1"}, "--warmup-steps"},
      {{"--auto", "--max-slowdown", "1%", "--gpu-spec", "b300"}, "unknown GPU spec 'b300'"},
      {{"--auto", "--max-slowdown", "1%", "--plan-output", "/nonexistent/dir/p.json"}, "/nonexistent/dir does not exist"},
      // With --plan, --max-slowdown is the measured verification's budget (it was refused before verification).
      {{"--plan", s.plan.string(), "--max-slowdown", "abc"}, "--max-slowdown 'abc' is not a number"},
      {{"--plan", s.plan.string(), "--verify-log", "/nonexistent/dir/v.jsonl"}, "/nonexistent/dir does not exist"},
      {{"--plan", s.plan.string(), "--no-verify", "--verify-log", "v.jsonl"}, "--verify-log needs the verification on"},
      {{"--plan", s.plan.string(), "--switch-latency-ms", "-2"}, "--switch-latency-ms"},
      {{"--plan", s.plan.string(), "--one-pair-follow-s", "-1"}, "--one-pair-follow-s"},
      {{"--plan", s.plan.string(), "--one-pair-follow-s", "soon"}, "--one-pair-follow-s"},
  };
  for (const auto& c : cases) {
    EXPECT_EQ(try_run(c.opts), 2) << c.message << ": " << slurp(out);
    EXPECT_NE(slurp(out).find(c.message), std::string::npos) << slurp(out);
    EXPECT_FALSE(fs::exists(marker)) << c.message;
  }
}

}  // namespace
