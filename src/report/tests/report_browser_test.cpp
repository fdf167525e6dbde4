// The plan report of the shipped GPT-3 XL trace opened in a real headless chromium (issue 17's check): the page
// renders without a console error, its DOM holds the timeline, the frontier chart and the warnings section, and
// its screenshot (GEARSHIFT_ARTIFACTS_DIR/report.png, kept as a CI artifact) is not blank.
// Without chromium (or Chart.js) the test skips, saying so, unless $CI is set: then it fails.
#include <sys/wait.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <array>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "png_decode.hpp"

namespace {

namespace fs = std::filesystem;

struct Result {
  int code = -1;
  std::string out;
};

// `cmd` through the shell; stdout captured (stderr goes where the command line sends it).
Result shell(const std::string& cmd) {
  Result r;
  FILE* p = popen(cmd.c_str(), "r");
  if (p == nullptr) return r;
  std::array<char, 4096> buf;
  std::size_t n;
  while ((n = fread(buf.data(), 1, buf.size(), p)) > 0) r.out.append(buf.data(), n);
  const int status = pclose(p);
  r.code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return r;
}

std::string slurp(const fs::path& p) {
  std::ifstream f(p, std::ios::binary);
  std::ostringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

// $GEARSHIFT_CHROMIUM, else the first of the usual names on PATH; empty when none.
std::string find_chromium() {
  if (const char* e = std::getenv("GEARSHIFT_CHROMIUM"); e != nullptr && *e != '\0') return e;
  for (const char* name : {"chromium", "chromium-browser", "google-chrome", "google-chrome-stable"}) {
    Result r = shell(std::string("command -v ") + name + " 2>/dev/null");
    if (r.code == 0 && !r.out.empty()) return r.out.substr(0, r.out.find('\n'));
  }
  return "";
}

bool in_ci() {
  const char* ci = std::getenv("CI");
  return ci != nullptr && *ci != '\0' && std::string(ci) != "0" && std::string(ci) != "false";
}

#define SKIP_OR_FAIL(why)                                                           \
  do {                                                                              \
    if (in_ci()) FAIL() << (why) << " (CI is set: the browser check must run)";     \
    GTEST_SKIP() << (why) << "; install it (.ci/run does) to run the browser check"; \
  } while (0)

// Flags for a headless chromium in a container running as root (no sandbox, no GPU, small /dev/shm), with a
// private profile so that parallel runs do not share one.
std::string chromium_command(const std::string& chromium, const fs::path& profile) {
  return "timeout 60 '" + chromium +
         "' --headless=new --no-sandbox --disable-gpu --disable-dev-shm-usage --no-first-run "
         "--no-default-browser-check --disable-extensions --disable-background-networking --hide-scrollbars "
         "--user-data-dir='" +
         profile.string() + "' --window-size=1400,2300 --enable-logging=stderr --v=0 ";
}

TEST(ReportBrowser, ShippedTraceRendersWithoutErrorsAndItsScreenshotIsNotBlank) {
  const std::string chromium = find_chromium();
  if (chromium.empty()) SKIP_OR_FAIL("chromium not found (set GEARSHIFT_CHROMIUM or install Debian's chromium)");
  const fs::path art(GEARSHIFT_ARTIFACTS_DIR);
  fs::create_directories(art);
  const fs::path html = art / "report.html", png = art / "report.png";
  fs::remove(png);
  const fs::path trace = fs::path(GEARSHIFT_DATA_DIR) / "traces" / "gpt3xl_h200_trace.json.gz";
  Result plan = shell(std::string(GEARSHIFT_BINARY) + " plan '" + trace.string() + "' --report '" + html.string() +
                      "' 2>&1");
  if (plan.code != 0 && plan.out.find("no Chart.js") != std::string::npos) SKIP_OR_FAIL(plan.out);
  ASSERT_EQ(plan.code, 0) << plan.out;
  ASSERT_TRUE(fs::exists(html));

  const fs::path tmp = fs::path(::testing::TempDir()) / ("gs-chromium-" + std::to_string(::getpid()));
  fs::create_directories(tmp);
  const std::string url = "file://" + fs::absolute(html).string();
  const auto t0 = std::chrono::steady_clock::now();
  // The DOM after the page's scripts ran (Chart.js draws synchronously: animations are off).
  const fs::path log = tmp / "dom.stderr";
  Result dom = shell(chromium_command(chromium, tmp / "profile") + "--dump-dom '" + url + "' 2>'" + log.string() + "'");
  const std::string err = slurp(log);
  ASSERT_EQ(dom.code, 0) << "chromium failed:\n" << err.substr(0, 4000);
  // Console messages reach stderr as "...:CONSOLE(line)] "text", source: ..."; the page writes none of its own.
  std::istringstream lines(err);
  for (std::string line; std::getline(lines, line);)
    EXPECT_EQ(line.find(":CONSOLE"), std::string::npos) << "console message: " << line;
  EXPECT_NE(dom.out.find("data-gs-rendered=\"ok\""), std::string::npos)
      << "the page did not finish rendering; its errors: "
      << dom.out.substr(dom.out.find("id=\"gs-errors\""), 2000);
  for (const char* id : {"id=\"gs-timeline\"", "id=\"gs-kernel-chart\"", "id=\"gs-clock-chart\"",
                         "id=\"gs-frontier-chart\"", "id=\"gs-latency-chart\"", "id=\"gs-energy-chart\"",
                         "id=\"gs-warnings\"", "id=\"gs-license\""})
    EXPECT_NE(dom.out.find(id), std::string::npos) << id;
  // Chart.js sized every canvas it drew on (style="display: block; box-sizing: border-box; ...").
  std::size_t drawn = 0;
  for (std::size_t at = 0; (at = dom.out.find("box-sizing: border-box", at)) != std::string::npos; ++at) ++drawn;
  EXPECT_GE(drawn, 5u) << "charts drawn";
  EXPECT_NE(dom.out.find("Step detection"), std::string::npos);
  EXPECT_NE(dom.out.find("modelled"), std::string::npos);
  // The page rounds as the terminal does (`gearshift demo`: "P(step time over the budget) = 62 %" of 0.625): the
  // browser's toFixed read 63 % (issue 51).
  EXPECT_NE(dom.out.find("P(step time over the budget) = 62 %"), std::string::npos)
      << dom.out.substr(dom.out.find("P(step time over"), 60);

  // The same page with measured clock and power samples in its timeline (the GPT-3 XL trace has none): the page's
  // second y axis and sample series render too.
  std::string page = slurp(html);
  const auto at = page.find("\"measured\":null");
  ASSERT_NE(at, std::string::npos);
  const std::string samples = R"js("measured":{"source":"test samples (measured)","sm_mhz":[[0,1800],[100000,1755]],)js"
                              R"js("mem_mhz":[[0,3201]],"power_w":[[0,650.5],[100000,700]]})js";
  page.replace(at, std::string("\"measured\":null").size(), samples);
  const fs::path with_samples = tmp / "samples.html";
  std::ofstream(with_samples, std::ios::binary) << page;
  Result dom2 = shell(chromium_command(chromium, tmp / "profile") + "--dump-dom 'file://" + with_samples.string() +
                      "' 2>'" + (tmp / "samples.stderr").string() + "'");
  EXPECT_NE(dom2.out.find("data-gs-rendered=\"ok\""), std::string::npos)
      << slurp(tmp / "samples.stderr").substr(0, 4000);
  EXPECT_EQ(slurp(tmp / "samples.stderr").find(":CONSOLE"), std::string::npos) << slurp(tmp / "samples.stderr");
  EXPECT_NE(dom2.out.find("Measured: test samples (measured)."), std::string::npos);

  Result shot = shell(chromium_command(chromium, tmp / "profile") + "--screenshot='" + png.string() + "' '" + url +
                      "' >/dev/null 2>'" + (tmp / "shot.stderr").string() + "'");
  ASSERT_EQ(shot.code, 0) << slurp(tmp / "shot.stderr").substr(0, 4000);
  ASSERT_TRUE(fs::exists(png)) << "no screenshot written";
  const auto image = gearshift::report::testing::read_png(png.string());
  EXPECT_EQ(image.width, 1400u);
  // A blank page (one colour) has variance 0; the report's charts and text give well over 100.
  EXPECT_GT(gearshift::report::testing::luminance_variance(image), 100.0);
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  std::printf("chromium: DOM and screenshot in %.1f s; screenshot %s\n", s, png.c_str());
  std::error_code ec;
  fs::remove_all(tmp, ec);
}

}  // namespace
