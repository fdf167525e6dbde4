// `gearshift plan --report` and `demo --report` through the real binary: the file, its exit codes (issue 17).
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include <nlohmann/json.hpp>

#include <sys/wait.h>

namespace {

namespace fs = std::filesystem;

struct Result {
  int code = -1;
  std::string out;  // stdout and stderr
};

// `gearshift ARGS` with extra environment `env` ("K=V ..." or empty), through the shell.
Result run(const std::string& args, const std::string& env = "") {
  const std::string cmd = "env " + env + " " + GEARSHIFT_BINARY + " " + args + " 2>&1";
  Result r;
  FILE* p = popen(cmd.c_str(), "r");
  if (p == nullptr) return r;
  char buf[4096];
  for (std::size_t n; (n = fread(buf, 1, sizeof buf, p)) > 0;) r.out.append(buf, n);
  const int status = pclose(p);
  r.code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return r;
}

const std::string kTrace = std::string(GEARSHIFT_DATA_DIR) + "/traces/gpt3xl_h200_trace.json.gz";

fs::path temp(const std::string& name) {
  return fs::path(::testing::TempDir()) / ("report_cli_" + std::to_string(::getpid()) + "_" + name);
}

std::string slurp(const fs::path& p) {
  std::ifstream f(p, std::ios::binary);
  std::ostringstream s;
  s << f.rdbuf();
  return s.str();
}

// A stand-in for Chart.js's UMD build: the binary needs a file, not a browser.
fs::path fake_chartjs() {
  const fs::path p = temp("chart.min.js");
  std::ofstream(p) << "/*! Chart.js v3.9.1 | MIT */ window.Chart = function () {};";
  return p;
}

TEST(ReportCli, PlanWritesOneSelfContainedPageBesideItsJson) {
  const fs::path html = temp("plan.html");
  const auto r = run("plan " + kTrace + " --report " + html.string(), "GEARSHIFT_CHARTJS=" + fake_chartjs().string());
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("Report written " + html.string()), std::string::npos) << r.out;
  const std::string page = slurp(html);
  EXPECT_NE(page.find("window.Chart = function"), std::string::npos);
  EXPECT_EQ(page.find("<script src"), std::string::npos);
  // The command that made it, in the provenance.
  EXPECT_NE(page.find("gearshift plan " + kTrace + " --report " + html.string()), std::string::npos);
  // The chosen plan's saving range, drawn as error bars (issue 20 part 3): the same figures as the table's Range.
  EXPECT_NE(page.find("gs-range-chart"), std::string::npos);
  const auto at = page.find("\"saving_range\":{");
  ASSERT_NE(at, std::string::npos);
  EXPECT_NE(page.find("\"samples\":200", at), std::string::npos);
  EXPECT_NE(page.find("\"saving_low_pct\":", at), std::string::npos);
}

TEST(ReportCli, JsonOutputStaysOneObject) {
  const fs::path html = temp("json.html");
  const std::string cmd = "env GEARSHIFT_CHARTJS=" + fake_chartjs().string() + " " + GEARSHIFT_BINARY +
                          " demo --json --report " + html.string() + " 2>/dev/null";
  Result r;
  FILE* p = popen(cmd.c_str(), "r");
  ASSERT_NE(p, nullptr);
  char buf[4096];
  for (std::size_t n; (n = fread(buf, 1, sizeof buf, p)) > 0;) r.out.append(buf, n);
  ASSERT_EQ(WEXITSTATUS(pclose(p)), 0) << r.out;
  const auto j = nlohmann::json::parse(r.out, nullptr, false);
  EXPECT_TRUE(j.is_object()) << r.out;
  EXPECT_TRUE(j.contains("strategies")) << r.out;
  EXPECT_TRUE(fs::exists(html));
}

TEST(ReportCli, BadPathsAndMissingChartJsAreExitThreeBeforePlanning) {
  const std::string env = "GEARSHIFT_CHARTJS=" + fake_chartjs().string();
  auto r = run("plan " + kTrace + " --report /nonexistent-dir/plan.html", env);
  EXPECT_EQ(r.code, 3) << r.out;
  EXPECT_NE(r.out.find("--report /nonexistent-dir/plan.html: cannot write the report: directory /nonexistent-dir "
                       "does not exist"),
            std::string::npos)
      << r.out;
  EXPECT_EQ(r.out.find("Iterations"), std::string::npos) << "planned before refusing: " << r.out;
  r = run("plan " + kTrace + " --report " + ::testing::TempDir(), env);
  EXPECT_EQ(r.code, 3) << r.out;
  EXPECT_NE(r.out.find("is a directory"), std::string::npos) << r.out;
  r = run("plan " + kTrace + " --report " + temp("x.html").string(), "GEARSHIFT_CHARTJS=/nonexistent/chart.min.js");
  EXPECT_EQ(r.code, 3) << r.out;
  EXPECT_NE(r.out.find("GEARSHIFT_CHARTJS=/nonexistent/chart.min.js: no such file"), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find("Iterations"), std::string::npos) << r.out;
  EXPECT_FALSE(fs::exists(temp("x.html")));
}

}  // namespace
