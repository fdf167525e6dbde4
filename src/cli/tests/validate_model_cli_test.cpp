// `gearshift validate-model SWEEP...` through the real binary: (a) a sweep written here from a law the model
// represents exactly (time T_c + A/f, power the V100 spec's idle line + P_k + g·V(f)²·f), so every MODELLED figure
// meets the MEASURED one and the model picks the oracle's clock; (b) the public NV-DVFS-Benchmark V100 sweeps,
// whose pooled figures are bench/kernel_validation's (docs/model-validation.md); (c) each bad input: one line
// naming the file (and line), exit 3, no abort.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <string>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "run_binary.hpp"
#include "tmp_dir.hpp"

namespace gearshift {
namespace {

namespace fs = std::filesystem;
using test::Result;
using test::run;

struct TmpDir : test::TmpDir {
  TmpDir() : test::TmpDir("gearshift_validate_model_") {}
};

nlohmann::json json_of(const Result& r) {
  auto j = nlohmann::json::parse(r.out, nullptr, false);
  EXPECT_FALSE(j.is_discarded()) << r.out;
  return j;
}

// The V100 spec's board law (data/gpus/v100.json: idle 27 W at 135 MHz, 55 W at 1530; knee 1065 MHz; V below it
// 0.70 of V_max, the PowerParams default), the model's power form.
double v100_power_w(double f, double static_w, double g_w_per_mhz) {
  const double idle = 27 + (55.0 - 27) * (f - 135) / (1530 - 135);
  const double v = f <= 1065 ? 0.70 : 0.70 + 0.30 * (f - 1065) / (1530 - 1065);
  return idle + static_w + g_w_per_mhz * v * v * f;
}

// 6 kernels, 11 clocks; applied clocks beside requested ones 7 MHz off (the applied ones are the truth).
std::string synthetic_sweep() {
  std::string s = "# board: v100\nkernel,sm_clock_mhz,applied_sm_clock_mhz,time_ms,power_w\n";
  for (int k = 0; k < 6; ++k)
    for (int f : {510, 615, 720, 825, 930, 1035, 1140, 1245, 1350, 1455, 1530}) {
      const double t_s = 0.002 * k + (10.0 + 5 * k) / f;  // T_c + A/f, A in s·MHz
      s += fmt::format("k{},{},{},{:.12g},{:.12g}\n", k, f + 7, f, 1e3 * t_s, v100_power_w(f, 10 + 4 * k, 0.02 + 0.012 * k));
    }
  return s;
}

TEST(ValidateModelCli, ASweepTheModelRepresentsIsPredictedExactly) {
  TmpDir t;
  const std::string path = t.write("synthetic.csv", synthetic_sweep());
  const Result r = run("validate-model --json " + path);
  ASSERT_EQ(r.code, 0) << r.out;
  const auto j = json_of(r);
  ASSERT_EQ(j["kernels"].size(), 6u);
  const auto& all = j["pooled"]["all"];
  EXPECT_EQ(all["kernels"], 6);
  EXPECT_EQ(all["interpolation"]["model"]["points"], 6 * 8);
  EXPECT_LT(all["interpolation"]["model"]["time_mape_pct"].get<double>(), 0.01);
  EXPECT_LT(all["interpolation"]["model"]["energy_mape_pct"].get<double>(), 0.01);
  EXPECT_LT(all["extrapolation"]["model"]["time_mape_pct"].get<double>(), 0.01);
  EXPECT_LT(all["extrapolation"]["model"]["energy_mape_pct"].get<double>(), 0.01);
  // The energy baseline (a quadratic in f) cannot follow the V-curve's knee: the model beats it.
  EXPECT_GT(all["extrapolation"]["baselines"]["energy_mape_pct"].get<double>(), 1.0);
  for (const auto& k : j["kernels"]) {
    EXPECT_EQ(k["interpolation"]["calibration_mhz"], (std::vector<int>{510, 1035, 1530}));  // applied clocks
    EXPECT_EQ(k["extrapolation"]["calibration_mhz"], (std::vector<int>{1245, 1350, 1530}));
    for (const auto& c : k["clock_choice"]) {
      EXPECT_EQ(c["model_mhz"], c["oracle_mhz"]) << k["kernel"] << " at " << c["max_slowdown_pct"];
      EXPECT_FALSE(c["over_bound"].get<bool>());
    }
  }
  // No clock is faster than the top one: at 0 % both keep it; at 5 % both save the same.
  EXPECT_TRUE(all["clock_choice"][0]["kept_pct"].is_null());
  EXPECT_GT(all["clock_choice"][3]["oracle_saving_mean_pct"].get<double>(), 0.5);
  EXPECT_NEAR(all["clock_choice"][3]["kept_pct"].get<double>(), 100.0, 1e-6);
  EXPECT_EQ(all["clock_choice"][3]["over_bound"], 0);

  // The text form labels its figures and names the board.
  const Result text = run("validate-model " + path);
  ASSERT_EQ(text.code, 0) << text.out;
  EXPECT_NE(text.out.find("board v100: spec data/gpus/v100.json"), std::string::npos) << text.out;
  EXPECT_NE(text.out.find("MODELLED against MEASURED"), std::string::npos);
  EXPECT_NE(text.out.find("| " + path + " | k5 | 877 | 11 | 510, 1035, 1530 |"), std::string::npos) << text.out;
}

TEST(ValidateModelCli, AnyBoardWithAPowerLimit) {
  TmpDir t;
  std::string s = synthetic_sweep();
  s.replace(s.find("# board: v100"), 13, "# board: my-gpu\n# power_limit_w: 280");
  const std::string path = t.write("mine.csv", s);
  const Result r = run("validate-model " + path + " --json");
  ASSERT_EQ(r.code, 0) << r.out;  // the header gives the limit
  const auto j = json_of(r);
  EXPECT_NE(j["boards"]["my-gpu"].get<std::string>().find("stand-in board"), std::string::npos) << j["boards"];
  EXPECT_NE(j["boards"]["my-gpu"].get<std::string>().find("power limit 280 W"), std::string::npos) << j["boards"];
  EXPECT_EQ(j["pooled"]["all"]["kernels"], 6);
  EXPECT_LT(j["pooled"]["all"]["interpolation"]["model"]["time_mape_pct"].get<double>(), 0.01);  // time needs no board
}

// (b) The public NV-DVFS V100 sweeps as bench/kernel_validation reads them (real then micro: the same folds).
TEST(ValidateModelCli, PublicNvDvfsV100SweepsGiveTheBenchFigures) {
  const std::string dir = std::string(GEARSHIFT_SHARED_DIR) + "/data/kernel_sweeps/NV-DVFS-Benchmark/data/";
  if (!fs::exists(dir)) GTEST_SKIP() << "shared kernel sweeps not found under " << dir;
  const Result r = run("validate-model --json " + dir + "v100-dvfs-real-profile.csv " + dir +
                       "v100-dvfs-microbenchmark-profile.csv");
  ASSERT_EQ(r.code, 0) << r.out.substr(0, 2000);
  const auto j = json_of(r);
  ASSERT_EQ(j["pooled"]["per_file"].size(), 2u);
  const auto& real = j["pooled"]["per_file"][0];
  EXPECT_EQ(real["kernels"], 20);
  // docs/model-validation.md, "Per dataset" and the targets table: nv-dvfs v100 real 2.70 / 4.96 (interpolation).
  EXPECT_EQ(real["interpolation"]["model"]["points"], 120);
  EXPECT_NEAR(real["interpolation"]["model"]["time_mape_pct"].get<double>(), 2.70, 0.005);
  EXPECT_NEAR(real["interpolation"]["model"]["energy_mape_pct"].get<double>(), 4.96, 0.005);
  const auto& micro = j["pooled"]["per_file"][1];
  EXPECT_NEAR(micro["interpolation"]["model"]["time_mape_pct"].get<double>(), 1.93, 0.005);
  EXPECT_NEAR(micro["interpolation"]["model"]["energy_mape_pct"].get<double>(), 4.24, 0.005);
  EXPECT_EQ(j["files"][0]["format"], "NV-DVFS profile CSV");
}

// (c) Bad inputs.
struct Bad {
  const char* name;
  const char* text;
  const char* args;     // extra arguments
  const char* message;  // expected in the output, after the file's path
};

TEST(ValidateModelCli, BadInputsNameTheFileAndLine) {
  TmpDir t;
  const Bad cases[] = {
      {"empty.csv", "", "", ": empty file (no header line"},
      {"comments.csv", "# board: v100\n\n", "", ": empty file (no header line"},
      {"no_time.csv", "# board: v100\nkernel,sm_clock_mhz,power_w\nk,1000,100\n", "",
       ":2: missing column 'time_s', 'time_ms' or 'time_us'"},
      {"no_kernel.csv", "sm_clock_mhz,time_s,energy_j\n1000,1,100\n", "--board v100", ":1: missing column 'kernel'"},
      {"no_energy.csv", "kernel,sm_clock_mhz,time_s\nk,1000,1\n", "--board v100", ":1: missing column 'energy_j' or 'power_w'"},
      {"text.csv", "kernel,sm_clock_mhz,time_s,energy_j\nk,1000,1,100\nk,1100,fast,90\n", "--board v100",
       ":3: column 'time_s' is not a number: 'fast'"},
      {"zero.csv", "kernel,sm_clock_mhz,time_s,energy_j\nk,0,1,100\n", "--board v100",
       ":2: column 'sm_clock_mhz' must be > 0"},
      {"unknown.csv", "# board: my-gpu\nkernel,sm_clock_mhz,time_s,energy_j\nk,1000,1,100\n", "",
       ": board 'my-gpu' has no shipped spec (known: "},
      {"noboard.csv", "kernel,sm_clock_mhz,time_s,energy_j\nk,1000,1,100\n", "", ": names no board"},
      {"one_clock.csv", "# board: v100\nkernel,sm_clock_mhz,time_s,energy_j\nk,1000,1,100\n", "",
       ":3: kernel 'k' has 1 SM clock(s); the check needs at least 4"},
      {"twice.csv", "# board: v100\nkernel,sm_clock_mhz,time_s,energy_j\nk,1000,1,100\nk,1000,1,90\n", "",
       ":4: kernel 'k' already has a sample at SM 1000 MHz"},
      {"ragged.csv", "# board: v100\nkernel,sm_clock_mhz,time_s,energy_j\nk,1000,1\n", "",
       ":3: expected 4 fields as in the header (line 2), got 3"},
  };
  for (const Bad& b : cases) {
    const std::string path = t.write(b.name, b.text);
    const Result r = run("validate-model " + path + " " + b.args);
    EXPECT_EQ(r.code, 3) << b.name << ": " << r.out;
    EXPECT_NE(r.out.find(path + b.message), std::string::npos) << b.name << ": " << r.out;
    EXPECT_EQ(r.out.find("internal error"), std::string::npos) << r.out;
  }
  EXPECT_EQ(run("validate-model " + (t.dir / "missing.csv").string()).code, 3);
}

// A kernel with too few clocks is skipped with a line naming it; the others are checked. A counter column empty on
// every row is ignored, said once.
TEST(ValidateModelCli, SkipsAKernelWithOneClockAndIgnoresAnEmptyCounterColumn) {
  TmpDir t;
  std::string s = synthetic_sweep();
  s.replace(s.find("power_w\n"), 8, "power_w,dram_active\n");
  std::string rows;
  for (std::size_t p = s.find('\n', s.find("dram_active")) + 1; p < s.size();) {
    const std::size_t e = s.find('\n', p);
    rows += s.substr(p, e - p) + ",\n";
    p = e + 1;
  }
  s = s.substr(0, s.find('\n', s.find("dram_active")) + 1) + rows + "lonely,1007,1000,3.5,150,\n";
  const std::string path = t.write("skip.csv", s);
  const Result r = run("validate-model " + path);
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_NE(r.out.find(path + ":69: kernel 'lonely' has 1 SM clock(s); the check needs at least 4 (3 to calibrate, 1 "
                              "to predict): skipped"),
            std::string::npos)
      << r.out;
  const std::string ignored = path + ": counter column(s) dram_active empty on every row: ignored";
  ASSERT_NE(r.out.find(ignored), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find(ignored, r.out.find(ignored) + 1), std::string::npos);  // once
  EXPECT_NE(r.out.find("6 kernel sweep(s) from 1 file(s)"), std::string::npos) << r.out;
}

// A sweep whose clocks lie outside its named board's spec is checked, with a line saying so.
TEST(ValidateModelCli, ClocksOutsideTheSpecAreSaid) {
  TmpDir t;
  std::string s = "# board: v100\nkernel,sm_clock_mhz,time_s,energy_j\n";
  for (int f : {1600, 1700, 1800, 1900, 2000}) s += fmt::format("k,{},{},{}\n", f, 1 + 1000.0 / f, 100 + f / 10.0);
  const std::string path = t.write("fast.csv", s);
  const Result r = run("validate-model " + path);
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("board 'v100': SM clocks 1600-2000 MHz measured, outside the spec's 135-1530 MHz"),
            std::string::npos)
      << r.out;
}

}  // namespace
}  // namespace gearshift
