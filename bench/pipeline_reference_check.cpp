// Reproduces the Perseus reference frontiers (data README §4) and times the solver.
// Usage: pipeline_reference_check [SHARED_DIR] [--quick]   (SHARED_DIR defaults to the build's ../shared)
// Prints Markdown tables: level A (exp-fit) and level B (hull) per file, and wall times. Exit 1 on a failed check.
#include <chrono>
#include <ctime>
#include <cstdio>
#include <filesystem>
#include <string>

#include <fmt/core.h>

#include "pipeline/planner.hpp"
#include "pipeline/reference.hpp"

using namespace gearshift::pipeline;

namespace {
double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

// Wall time can be inflated on a shared machine, so CPU time of this (single-threaded) process is reported too.
PipelinePlan run(const Profile& prof, int mb, CostModelKind kind, double unit_s, double* secs, double* cpu) {
  PipelineProblem p;
  p.schedule = PipelineSchedule::k1F1B;
  p.stages = 8;
  p.microbatches = mb;
  p.model = {unit_s, 83.64, kind};
  auto t0 = std::chrono::steady_clock::now();
  std::clock_t c0 = std::clock();
  auto plan = plan_pipeline(prof, p);
  *cpu = static_cast<double>(std::clock() - c0) / CLOCKS_PER_SEC;
  *secs = seconds_since(t0);
  return plan;
}
}  // namespace

int main(int argc, char** argv) {
  std::string shared = GEARSHIFT_SHARED_DIR;
  bool quick = false;
  int only_mb = 0;  // --mb N: only that microbatch count (profiling)
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--quick") quick = true;
    else if (a == "--mb" && i + 1 < argc) only_mb = std::stoi(argv[++i]);
    else shared = a;
  }
  const std::string base = shared + "/data/perseus";
  if (!std::filesystem::exists(base)) {
    std::fprintf(stderr, "no %s\n", base.c_str());
    return 2;
  }
  bool ok = true;
  fmt::print("Times: wall s / CPU s of the planner (model fit + DAG + frontier), one thread.\n\n");
  fmt::print("| model | N | rows | T_max-1 / T_min match | level A max r (exp-fit) | exp-fit s | level B min r | "
             "mean r | max r (hull) | uncovered | hull s |\n|---|---|---|---|---|---|---|---|---|---|---|\n");
  for (std::string model : {"bloom", "gpt3-175b"}) {
    auto prof = read_profile(base + "/stage_profile/" + model + "+a100_sxm_bf16.csv");
    for (int mb : {12, 24, 48, 96}) {
      if ((quick && mb > 12) || (only_mb && mb != only_mb)) continue;
      auto ref = read_curve_csv(fmt::format("{}/iteration_time_energy/a100_sxm/{}_bf16_mb{}.csv", base, model, mb));
      double ts_exp = 0, ts_hull = 0, cpu_exp = 0, cpu_hull = 0;
      auto pe = run(prof, mb, CostModelKind::kExpFit, 1e-3, &ts_exp, &cpu_exp);
      auto a = compare_level_a(frontier_rows(pe.frontier), ref, 1e-3);
      auto ph = run(prof, mb, CostModelKind::kHull, 1e-3, &ts_hull, &cpu_hull);
      auto b = compare_level_b(frontier_rows(ph.frontier), ref);
      bool pass = a.first_matches && a.last_matches && a.unmatched == 0 && a.rows_ours == a.rows_ref &&
                  a.max_r <= 1e-6 && b.max_r <= 1e-3 && b.uncovered == 0;
      ok &= pass;
      fmt::print("| {} | {} | {}/{} | {} | {:.2e} | {:.3f} / {:.3f} | {:+.3f} % | {:+.3f} % | {:+.3f} % | {} | {:.3f} / {:.3f} |{}\n",
                 model, mb, a.rows_ours, a.rows_ref, a.first_matches && a.last_matches ? "yes" : "NO", a.max_r,
                 ts_exp, cpu_exp, 100 * b.min_r, 100 * b.mean_r, 100 * b.max_r, b.uncovered, ts_hull, cpu_hull,
                 pass ? "" : " FAIL");
    }
  }
  if (!quick && !only_mb) {
    auto prof = read_profile(base + "/stage_profile/bloom+a100_sxm_bf16.csv");
    for (auto kind : {CostModelKind::kHull, CostModelKind::kExpFit}) {
      double ts = 0, cpu = 0;
      auto p = run(prof, 96, kind, 1e-4, &ts, &cpu);
      fmt::print("\nbloom N=96 unit 0.1 ms, {}: {} unit steps in {:.3f} s wall / {:.3f} s CPU\n",
                 kind == CostModelKind::kHull ? "hull" : "exp-fit", p.frontier.points.size() - 1, ts, cpu);
    }
  }
  fmt::print("\n{}\n", ok ? "ALL CHECKS PASS" : "SOME CHECKS FAILED");
  return ok ? 0 : 1;
}
