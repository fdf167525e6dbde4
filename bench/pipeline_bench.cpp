// `gearshift pipeline` frontier cost against pipeline size (issue 48): 1F1B, hull cost model, 1 ms grid,
// blocking power 83.64 W, on S stages built in memory from the A100-SXM GPT-3 175B stage profile of
// ../shared/data/perseus (its 8 stages: the first and last kept at the ends, stages 1–6 repeated in between).
//   build/bench/pipeline_bench --benchmark_filter='BM_PipelineFrontier/32/'
// Arguments: stages, microbatches. Counters: ops (instructions), steps (frontier points − 1).
// Skips (with a message) without ../shared.
#include <benchmark/benchmark.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include <fmt/core.h>

#include "pipeline/planner.hpp"

namespace {

using namespace gearshift::pipeline;

const std::string kProfile = std::string(GEARSHIFT_SHARED_DIR) + "/data/perseus/stage_profile/gpt3-175b+a100_sxm_bf16.csv";

// The 8-stage profile stretched to S stages: stage 0 ← 0, stage S−1 ← 7, stage s ← 1 + (s − 1) mod 6 otherwise.
Profile stretched_profile(int stages) {
  std::ifstream f(kProfile);
  std::string header, line;
  std::getline(f, header);
  std::vector<std::pair<int, std::string>> rows;  // (source stage, rest of the row)
  while (std::getline(f, line)) {
    const auto comma = line.find(',');
    rows.emplace_back(std::stoi(line.substr(0, comma)), line.substr(comma));
  }
  std::string text = header + "\n";
  for (int s = 0; s < stages; ++s) {
    const int from = s == 0 ? 0 : s == stages - 1 ? 7 : 1 + (s - 1) % 6;
    for (const auto& [src, rest] : rows)
      if (src == from) text += fmt::format("{}{}\n", s, rest);
  }
  return parse_profile(text, fmt::format("{} stretched to {} stages", kProfile, stages));
}

void BM_PipelineFrontier(benchmark::State& state) {
  if (!std::filesystem::exists(kProfile)) {
    state.SkipWithError(("no " + kProfile + " (../shared absent)").c_str());
    return;
  }
  PipelineProblem p;
  p.schedule = PipelineSchedule::k1F1B;
  p.stages = static_cast<int>(state.range(0));
  p.microbatches = static_cast<int>(state.range(1));
  p.model = {1e-3, 83.64, CostModelKind::kHull};
  const Profile profile = stretched_profile(p.stages);
  std::size_t steps = 0, ops = 0;
  for (auto _ : state) {
    auto plan = plan_pipeline(profile, p);
    steps = plan.frontier.points.size() - 1;
    ops = plan.dag.ops.size();
    benchmark::DoNotOptimize(plan.frontier.points.back());
  }
  state.counters["ops"] = static_cast<double>(ops);
  state.counters["steps"] = static_cast<double>(steps);
}

BENCHMARK(BM_PipelineFrontier)
    ->Args({32, 64})
    ->Args({32, 128})
    ->Args({32, 256})
    ->Args({64, 1024})
    ->Unit(benchmark::kSecond)
    ->Iterations(1);

}  // namespace

BENCHMARK_MAIN();
