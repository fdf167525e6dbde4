// `gearshift plan-ranks` through the real binary: the two traced DDP ranks (shared data), per-rank plan files,
// and the exit codes of bad input.
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

namespace {

struct Result {
  int code = -1;
  std::string out;
};

Result run(const std::string& args) {
  std::string cmd = std::string(GEARSHIFT_BINARY) + " " + args + " 2>/dev/null";
  FILE* p = popen(cmd.c_str(), "r");
  Result r;
  char buf[4096];
  for (std::size_t n; (n = std::fread(buf, 1, sizeof buf, p)) > 0;) r.out.append(buf, n);
  int status = pclose(p);
  r.code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return r;
}

const std::string kDir = std::string(GEARSHIFT_SHARED_DIR) + "/data/traces/";

TEST(PlanRanksCli, DdpRanksJsonAndPlanFiles) {
  if (!std::filesystem::exists(kDir + "ddp2_gpt2m_rank0_h200_trace.json.gz")) GTEST_SKIP() << "no ../shared";
  auto prefix = std::filesystem::temp_directory_path() / ("gs_plan_ranks_" + std::to_string(getpid()) + "_");
  Result r = run("plan-ranks " + kDir + "ddp2_gpt2m_rank0_h200_trace.json.gz " + kDir +
                 "ddp2_gpt2m_rank1_h200_trace.json.gz --json -o " + prefix.string());
  ASSERT_EQ(r.code, 0) << r.out;
  auto j = nlohmann::json::parse(r.out);
  EXPECT_TRUE(j["modelled"].get<bool>());
  EXPECT_EQ(j["straggler"].get<int>(), 0);
  EXPECT_LE(j["job_step_time_after_s"].get<double>(), j["job_step_time_before_s"].get<double>() * (1 + 1e-9));
  EXPECT_GT(j["ranks"][1]["saving_pct"].get<double>(), 10.0);
  for (int rank = 0; rank < 2; ++rank) {
    auto path = prefix.string() + std::to_string(rank) + ".json";
    std::ifstream f(path);
    ASSERT_TRUE(f) << path;
    auto plan = nlohmann::json::parse(f);
    EXPECT_EQ(plan["format"], "gearshift-plan");
    EXPECT_EQ(plan["rank"].get<int>(), rank);
    EXPECT_FALSE(plan["positions"].empty());
    std::filesystem::remove(path);
  }
}

TEST(PlanRanksCli, BadInputExitCodes) {
  auto junk = std::filesystem::temp_directory_path() / ("gs_plan_ranks_junk_" + std::to_string(getpid()) + ".json");
  std::ofstream(junk) << "{ not a trace";
  EXPECT_EQ(run("plan-ranks " + junk.string()).code, 3);
  EXPECT_EQ(run("plan-ranks " + junk.string() + " --strategy nope").code, 2);
  EXPECT_EQ(run("plan-ranks /nonexistent/trace.json").code, 2);  // CLI11 ExistingFile
  std::filesystem::remove(junk);
}

}  // namespace
