// Runs the real `gearshift` binary as a user would and checks output and exit codes.
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>
#include <sys/wait.h>

#include <algorithm>
#include <array>
#include <set>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>

namespace {

struct Result {
  int code;
  std::string out;
};

Result run(const std::string& args) {
  std::string cmd = std::string(GEARSHIFT_BINARY) + " " + args + " 2>&1";
  FILE* p = popen(cmd.c_str(), "r");
  Result r{-1, ""};
  std::array<char, 4096> buf;
  std::size_t n;
  while ((n = fread(buf.data(), 1, buf.size(), p)) > 0) r.out.append(buf.data(), n);
  int status = pclose(p);
  r.code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return r;
}

std::string tmp(const std::string& name) {
  return (std::filesystem::temp_directory_path() / ("gearshift_cli_" + std::to_string(::getpid()) + name)).string();
}

TEST(Cli, DemoJsonHasTheDocumentedShape) {
  Result r = run("demo --json");
  ASSERT_EQ(r.code, 0) << r.out;
  auto j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["iterations"]["count"], 3);
  EXPECT_EQ(j["iterations"]["kernels_per_iteration"], 1532);
  EXPECT_NEAR(j["iterations"]["period_us"].get<double>(), 201392, 2000);
  EXPECT_GT(j["baseline"]["energy_j"].get<double>(), 100);
  EXPECT_NEAR(j["measured"]["energy_j"].get<double>(), 135.385, 1e-9);
  std::set<std::string> names;
  for (const auto& s : j["strategies"]) {
    names.insert(s["name"].get<std::string>());
    for (const char* k : {"switch_latency_us", "time_s", "energy_j", "saving_pct", "slowdown_pct", "clock_changes_per_step"})
      EXPECT_TRUE(s.contains(k)) << k;
    EXPECT_LE(s["slowdown_pct"].get<double>(), 0.5 + 1e-9);
  }
  EXPECT_EQ(names, (std::set<std::string>{"iteration", "pass", "kernel-local", "kernel-global", "phase"}));
  EXPECT_EQ(j["strategies"].size(), 4u + 6u);  // phase × L ∈ {0, 10 µs, 100 µs, 1 ms, 6 ms, 20 ms}
}

TEST(Cli, DemoTableSaysModelledAndWritesAPlan) {
  std::string plan = tmp("plan.json");
  Result r = run("demo -o " + plan);
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("MODELLED"), std::string::npos);
  EXPECT_NE(r.out.find("kernel-global"), std::string::npos);
  std::ifstream in(plan);
  auto j = nlohmann::json::parse(in);
  std::filesystem::remove(plan);
  EXPECT_EQ(j["format"], "gearshift-plan");
  EXPECT_EQ(j["gpu"], "h200");
  EXPECT_EQ(j["strategy"], "phase");
  EXPECT_DOUBLE_EQ(j["switch_latency_us"].get<double>(), 6000);
  EXPECT_EQ(j["positions"].size(), 1952u);
  EXPECT_GE(j["phases"].size(), 1u);
  EXPECT_TRUE(j["model"].contains("activity_scale"));
  EXPECT_EQ(j["provenance"]["input"], "embedded:gpt3xl_h200_trace.json.gz");
  EXPECT_TRUE(j["predicted"]["modelled"].get<bool>());
}

TEST(Cli, PlanOnTheSharedTraceMatchesTheDemo) {
  const std::string f = std::string(GEARSHIFT_SHARED_DIR) + "/data/traces/gpt3xl_h200_trace.json.gz";
  if (!std::filesystem::exists(f)) GTEST_SKIP() << "../shared absent";
  Result a = run("plan " + f + " --gpu h200 --max-slowdown 0.5% --json");
  Result b = run("demo --json");
  ASSERT_EQ(a.code, 0) << a.out;
  auto ja = nlohmann::json::parse(a.out), jb = nlohmann::json::parse(b.out);
  EXPECT_EQ(ja["strategies"].size(), jb["strategies"].size());
  for (std::size_t i = 0; i < ja["strategies"].size(); ++i)
    EXPECT_DOUBLE_EQ(ja["strategies"][i]["energy_j"].get<double>(), jb["strategies"][i]["energy_j"].get<double>());
}

TEST(Cli, BadInputGivesOneLineAndADocumentedExitCode) {
  Result missing = run("plan /nonexistent/trace.json");
  EXPECT_EQ(missing.code, 3) << missing.out;
  EXPECT_NE(missing.out.find("/nonexistent/trace.json: cannot open"), std::string::npos) << missing.out;
  EXPECT_EQ(std::count(missing.out.begin(), missing.out.end(), '\n'), 1) << missing.out;

  std::string bad = tmp("bad.json");
  std::ofstream(bad) << "{\"traceEvents\": [";
  Result truncated = run("plan " + bad);
  EXPECT_EQ(truncated.code, 3) << truncated.out;
  EXPECT_NE(truncated.out.find("truncated"), std::string::npos) << truncated.out;

  std::ofstream(bad) << R"({"traceEvents":[{"ph":"X","cat":"kernel","name":"k","ts":1,"dur":2,"args":{}}]})";
  Result once = run("plan " + bad);
  EXPECT_EQ(once.code, 4) << once.out;
  std::filesystem::remove(bad);

  EXPECT_EQ(run("demo --gpu b200").code, 2);
  Result slow = run("demo --max-slowdown fast");
  EXPECT_EQ(slow.code, 2);
  EXPECT_NE(slow.out.find("0.5%"), std::string::npos) << slow.out;
  EXPECT_EQ(run("demo --strategy best").code, 2);
  EXPECT_EQ(run("").code, 2);
  EXPECT_EQ(run("demo --help").code, 0);
}

TEST(Cli, GpusPrintsTheSpec) {
  Result r = run("gpus --spec h200");
  EXPECT_EQ(r.code, 0);
  EXPECT_NE(r.out.find("345-1980 MHz, 110 values"), std::string::npos) << r.out;
  EXPECT_EQ(run("gpus --spec nope").code, 2);
}

}  // namespace
