#include "pipeline/profile_groups.hpp"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <string>
#include <vector>

#include "gpu/spec.hpp"
#include "model/fit_validation.hpp"
#include "pipeline/error.hpp"

namespace gearshift::pipeline {
using namespace gearshift::model;
namespace {

using ::testing::HasSubstr;

const std::string kHeader = "stage,instruction,frequency,time,energy\n";

TEST(ProfileGroups, MergesIdenticalStages) {
  const std::string text = kHeader +
                           "0,forward,1410,0.05,23.8\n0,backward,1410,0.09,44.5\n"
                           "1,forward,1410,0.05,23.8\n1,backward,1410,0.09,44.5\n"
                           "0,forward,855,0.07,18.2\n0,backward,855,0.14,33.6\n"
                           "1,forward,855,0.07,18.2\n1,backward,855,0.14,33.6\n"
                           "2,forward,1410,0.06,24.0\r\n2,forward,855,0.08,19.0\n";
  const Profile p = parse_profile(text, "t.csv");
  ASSERT_EQ(p.rows.size(), 10u);
  EXPECT_EQ(p.rows[1].instruction, Instruction::kBackward);
  EXPECT_EQ(p.rows[1].sm_clock_mhz, 1410);
  EXPECT_DOUBLE_EQ(p.rows[1].energy_j, 44.5);
  EXPECT_DOUBLE_EQ(p.rows[8].energy_j, 24.0);  // CRLF tolerated

  auto g = distinct_groups(p, 1593);
  ASSERT_EQ(g.size(), 3u);
  EXPECT_EQ(g[0].label(), "stages 0-1 forward");
  EXPECT_EQ(g[1].label(), "stages 0-1 backward");
  EXPECT_EQ(g[2].label(), "stage 2 forward");
  ASSERT_EQ(g[0].samples.size(), 2u);
  EXPECT_EQ(g[0].samples[0].sm_mhz, 855);  // sorted by clock
  EXPECT_EQ(g[0].samples[0].mem_mhz, 1593);
  EXPECT_DOUBLE_EQ(g[0].samples[1].time_s, 0.05);
}

// The reader's own errors (header, columns, numbers, duplicates) are profile_test.cpp's; the missing file here.
TEST(ProfileGroups, MissingFileIsAPipelineError) {
  EXPECT_THROW(read_profile("/nonexistent/p.csv"), PipelineError);
}

// The real measured sweeps: the numbers reported in docs/model-validation.md must be reproduced.
std::string profile(const char* model) {
  return std::string(GEARSHIFT_SHARED_DIR) + "/data/perseus/stage_profile/" + model + "+a100_sxm_bf16.csv";
}

struct SplitResult {
  ErrorStats spec, board, baseline;
};

std::vector<SplitResult> run_validation() {
  const auto spec = gpu::find_spec("a100");
  const DvfsModel spec_board(spec);
  std::vector<std::vector<ProfileGroup>> files;
  for (const char* m : {"gpt3-175b", "bloom"})
    files.push_back(distinct_groups(read_profile(profile(m)), spec.default_mem_clock_mhz));
  std::vector<int> clocks;
  for (const auto& s : files[0][0].samples) clocks.push_back(s.sm_mhz);
  std::vector<SplitResult> out;
  for (const auto& split : standard_splits(clocks)) {
    std::vector<HeldOut> all_spec, all_board;
    for (std::size_t i = 0; i < files.size(); ++i) {
      std::vector<std::vector<Sample>> other;
      for (const auto& g : files[1 - i]) other.push_back(g.samples);
      const DvfsModel board(spec, fit_voltage_curve(other, spec_board));
      for (const auto& g : files[i]) {
        auto a = evaluate_split(g.samples, split, spec_board), b = evaluate_split(g.samples, split, board);
        all_spec.insert(all_spec.end(), a.begin(), a.end());
        all_board.insert(all_board.end(), b.begin(), b.end());
      }
    }
    out.push_back({model_errors(all_spec), model_errors(all_board), baseline_errors(all_spec)});
  }
  return out;
}

void expect_stats(const ErrorStats& e, double t_mape, double t_max, double e_mape, double e_max) {
  EXPECT_EQ(e.n, 280);  // 8 distinct sweeps × 35 held-out clocks
  EXPECT_NEAR(e.time_mape_pct, t_mape, 0.005);
  EXPECT_NEAR(e.time_max_pct, t_max, 0.005);
  EXPECT_NEAR(e.energy_mape_pct, e_mape, 0.005);
  EXPECT_NEAR(e.energy_max_pct, e_max, 0.005);
}

TEST(PerseusValidation, ReproducesTheReportedErrors) {
  if (!std::filesystem::exists(profile("gpt3-175b")) || !std::filesystem::exists(profile("bloom")))
    GTEST_SKIP() << "shared Perseus data not found under " << GEARSHIFT_SHARED_DIR;
  const Profile p = read_profile(profile("gpt3-175b"));
  ASSERT_EQ(p.rows.size(), 608u);  // README §2.1: 8 stages × 2 instructions × 38 clocks
  auto groups = distinct_groups(p, 1593);
  ASSERT_EQ(groups.size(), 4u);
  EXPECT_EQ(groups[0].label(), "stages 0-6 forward");
  EXPECT_EQ(groups[3].label(), "stage 7 backward");

  auto r = run_validation();
  ASSERT_EQ(r.size(), 2u);
  // Interpolation (855, 1140, 1410 MHz) and extrapolation (1200, 1305, 1410 MHz): docs/model-validation.md.
  expect_stats(r[0].spec, 0.45, 4.01, 3.60, 12.59);
  expect_stats(r[0].board, 0.41, 4.01, 1.69, 9.39);
  expect_stats(r[0].baseline, 1.21, 2.49, 1.98, 6.02);
  expect_stats(r[1].spec, 0.66, 2.99, 6.82, 17.48);
  expect_stats(r[1].board, 0.66, 2.99, 3.61, 12.08);
  expect_stats(r[1].baseline, 3.03, 9.35, 20.25, 97.07);
}

}  // namespace
}  // namespace gearshift::pipeline
