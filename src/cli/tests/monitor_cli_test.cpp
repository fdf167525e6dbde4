// `gearshift monitor` as a user runs it: the real binary, the simulated GPU behind GEARSHIFT_NVML_LIBRARY.
#include <gtest/gtest.h>
#include <fcntl.h>
#include <spawn.h>
#include <sys/wait.h>

#include <cctype>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

extern char** environ;

namespace {

struct Proc {
  int code = -1;
  std::string out, err;
};

std::string slurp(const std::string& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

// Runs the gearshift binary with `args` and extra environment `env` ("K=V"); GEARSHIFT_SIMGPU_* and
// GEARSHIFT_NVML_LIBRARY of the test's own environment are replaced.
Proc gearshift(const std::vector<std::string>& args, std::vector<std::string> env) {
  std::vector<std::string> full_env;
  for (char** e = environ; *e; ++e) {
    std::string kv = *e;
    if (kv.rfind("GEARSHIFT_", 0) == 0 || kv.rfind("CUDA_VISIBLE_DEVICES=", 0) == 0) continue;
    full_env.push_back(kv);
  }
  bool has_lib = false;
  for (const auto& kv : env) has_lib |= kv.rfind("GEARSHIFT_NVML_LIBRARY=", 0) == 0;
  if (!has_lib) env.push_back(std::string("GEARSHIFT_NVML_LIBRARY=") + GEARSHIFT_SIMGPU_PATH);
  full_env.insert(full_env.end(), env.begin(), env.end());
  std::vector<char*> envp, argv;
  for (auto& kv : full_env) envp.push_back(kv.data());
  envp.push_back(nullptr);
  std::vector<std::string> all = {GEARSHIFT_BIN};
  all.insert(all.end(), args.begin(), args.end());
  for (auto& a : all) argv.push_back(a.data());
  argv.push_back(nullptr);
  static int n = 0;
  std::string base = ::testing::TempDir() + "monitor_cli_" + std::to_string(getpid()) + "_" + std::to_string(n++);
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_addopen(&fa, 1, (base + ".out").c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  posix_spawn_file_actions_addopen(&fa, 2, (base + ".err").c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  pid_t pid = 0;
  Proc r;
  if (posix_spawn(&pid, argv[0], &fa, nullptr, argv.data(), envp.data()) == 0) {
    int status = 0;
    waitpid(pid, &status, 0);
    r.code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  }
  posix_spawn_file_actions_destroy(&fa);
  r.out = slurp(base + ".out");
  r.err = slurp(base + ".err");
  return r;
}

int lines(const std::string& s) {
  int n = 0;
  for (char c : s) n += c == '\n';
  return n;
}

// The check of issue 3: 300 W for `sleep 2` is 600 J ± 3 % over 2 s ± 3 %.
TEST(MonitorCli, SleepTwoSecondsAt300W) {
  Proc r = gearshift({"monitor", "--json", "--", "sleep", "2"}, {"GEARSHIFT_SIMGPU_POWER_W=300"});
  ASSERT_EQ(r.code, 0) << r.err;
  auto j = nlohmann::json::parse(r.out);
  ASSERT_EQ(j["gpus"].size(), 1u);
  const auto& g = j["gpus"][0];
  EXPECT_EQ(g["index"], 0);
  EXPECT_NEAR(g["energy_j"].get<double>(), 600.0, 18.0);
  EXPECT_NEAR(g["time_s"].get<double>(), 2.0, 0.06);
  EXPECT_NEAR(g["avg_power_w"].get<double>(), 300.0, 9.0);
  EXPECT_DOUBLE_EQ(g["peak_power_w"].get<double>(), 300.0);
  EXPECT_EQ(g["method"], "counter");
  EXPECT_EQ(j["exit_code"], 0);
  EXPECT_EQ(r.err, "");
}

TEST(MonitorCli, HumanReportAndExitCodeOfCommand) {
  Proc r = gearshift({"monitor", "--", "sh", "-c", "echo out; echo err >&2; exit 7"},
                    {"GEARSHIFT_SIMGPU_POWER_W=100", "GEARSHIFT_SIMGPU_COUNT=2"});
  EXPECT_EQ(r.code, 7);
  EXPECT_EQ(r.out, "out\n");
  EXPECT_EQ(r.err.rfind("err\ngearshift: monitor: 'sh -c echo out; echo err >&2; exit 7' exited with 7 after ", 0), 0u)
      << r.err;
  EXPECT_NE(r.err.find("energy_J"), std::string::npos);
  EXPECT_EQ(lines(r.err), 1 + 1 + 1 + 2);  // command's line, summary, header, two GPUs
}

// Each fault: one line of notice, the command's output and exit code untouched.
struct FaultCase {
  const char* fault;
  const char* expect;  // in the notice
};
class MonitorFault : public ::testing::TestWithParam<FaultCase> {};

TEST_P(MonitorFault, OneLineNoticeCommandUntouched) {
  Proc r = gearshift({"monitor", "--json", "--", "sh", "-c", "sleep 0.6; echo out; exit 3"},
                    {"GEARSHIFT_SIMGPU_POWER_W=2000", std::string("GEARSHIFT_SIMGPU_FAULT=") + GetParam().fault});
  EXPECT_EQ(r.code, 3);
  std::string out = r.out;
  ASSERT_EQ(out.rfind("out\n", 0), 0u) << out;
  auto j = nlohmann::json::parse(out.substr(4));
  EXPECT_EQ(j["exit_code"], 3);
  EXPECT_EQ(lines(r.err), 1) << r.err;
  EXPECT_EQ(r.err.rfind("gearshift: monitor: ", 0), 0u) << r.err;
  EXPECT_NE(r.err.find(GetParam().expect), std::string::npos) << r.err;
}

INSTANTIATE_TEST_SUITE_P(Faults, MonitorFault,
                         ::testing::Values(FaultCase{"no-permission", "restricts clock changes"},
                                           FaultCase{"gpu-lost-after=0.3", "GPU 0 lost"},
                                           FaultCase{"no-energy-counter", "no usable energy counter"},
                                           FaultCase{"counter-wrap", "wrapped"}),
                         [](const auto& param_info) {
                           std::string n = param_info.param.fault;
                           for (char& c : n) c = std::isalnum(static_cast<unsigned char>(c)) ? c : '_';
                           return n;
                         });

TEST(MonitorCli, NoNvmlLibrary) {
  Proc r = gearshift({"monitor", "--", "true"}, {"GEARSHIFT_NVML_LIBRARY=/nonexistent/libnvidia-ml.so.1"});
  EXPECT_EQ(r.code, 5);
  EXPECT_EQ(lines(r.err), 1);
  EXPECT_NE(r.err.find("no GPU: NVML (/nonexistent/libnvidia-ml.so.1)"), std::string::npos) << r.err;
}

TEST(MonitorCli, NoGpu) {
  Proc r = gearshift({"monitor", "--", "true"}, {"GEARSHIFT_SIMGPU_COUNT=0"});
  EXPECT_EQ(r.code, 5);
  EXPECT_NE(r.err.find("reports 0 devices"), std::string::npos) << r.err;
  Proc v = gearshift({"monitor", "--", "true"}, {"CUDA_VISIBLE_DEVICES=3"});
  EXPECT_EQ(v.code, 5);
  EXPECT_NE(v.err.find("selects none"), std::string::npos) << v.err;
}

TEST(MonitorCli, UnknownSpecName) {
  Proc r = gearshift({"monitor", "--", "true"}, {"GEARSHIFT_SIMGPU_SPEC=h999"});
  EXPECT_EQ(r.code, 5);
  EXPECT_EQ(lines(r.err), 1);
  EXPECT_NE(r.err.find("h999"), std::string::npos) << r.err;
  Proc s = gearshift({"gpus", "--spec", "h999"}, {});
  EXPECT_EQ(s.code, 2);
  EXPECT_NE(s.err.find("h999"), std::string::npos) << s.err;
}

TEST(MonitorCli, CommandNotFoundAndSignals) {
  Proc r = gearshift({"monitor", "--", "/nonexistent/cmd"}, {});
  EXPECT_EQ(r.code, 127);
  EXPECT_NE(r.err.find("cannot run '/nonexistent/cmd'"), std::string::npos) << r.err;
  Proc k = gearshift({"monitor", "--json", "--", "sh", "-c", "kill -TERM $$"}, {});
  EXPECT_EQ(k.code, 128 + 15);
  EXPECT_EQ(nlohmann::json::parse(k.out)["exit_code"], 143);
}

TEST(MonitorCli, ForwardsSigtermToCommand) {
  // The shell signals gearshift (its parent) with SIGTERM; gearshift forwards it to the shell, which dies of it.
  Proc r = gearshift({"monitor", "--json", "--", "sh", "-c", "kill -TERM $PPID; sleep 5; exit 0"}, {});
  EXPECT_EQ(r.code, 128 + 15) << r.err;
  EXPECT_LT(nlohmann::json::parse(r.out)["gpus"][0]["time_s"].get<double>(), 4.0);
}

// `gearshift trace` waits for its program the same way (child_process.hpp): exit code, "cannot run", signals.
// The programs here use no CUDA, so the injection library is named but never loaded.
TEST(TraceCli, PassesExitCodesAndSignalsThrough) {
  const std::string out = ::testing::TempDir() + "trace_cli.jsonl.gz";
  const std::vector<std::string> env = {"GEARSHIFT_INJECT_LIBRARY=/bin/sh"};
  Proc missing = gearshift({"trace", "-o", out, "--", "/nonexistent/cmd"}, env);
  EXPECT_EQ(missing.code, 127);
  EXPECT_NE(missing.err.find("cannot run /nonexistent/cmd"), std::string::npos) << missing.err;
  Proc three = gearshift({"trace", "-o", out, "--", "sh", "-c", "exit 3"}, env);
  EXPECT_EQ(three.code, 3);
  EXPECT_NE(three.err.find("no trace written"), std::string::npos) << three.err;
  EXPECT_NE(three.err.find("the traced program exited with code 3"), std::string::npos) << three.err;
  // SIGTERM to gearshift reaches the program, which dies of it (not after its 5 s sleep).
  Proc term = gearshift({"trace", "-o", out, "--", "sh", "-c", "kill -TERM $PPID; sleep 5; exit 0"}, env);
  EXPECT_EQ(term.code, 128 + 15) << term.err;
  // SIGUSR1 is forwarded too (the program's handler decides), as for monitor and run.
  Proc usr = gearshift({"trace", "-o", out, "--", "sh", "-c", "trap 'exit 7' USR1; kill -USR1 $PPID; sleep 5 & wait"}, env);
  EXPECT_EQ(usr.code, 7) << usr.err;
}

TEST(MonitorCli, LogsAndUsageErrors) {
  std::string csv = ::testing::TempDir() + "monitor_cli.csv";
  Proc r = gearshift({"monitor", "--interval-ms", "50", "--csv", csv, "--", "sleep", "0.3"}, {});
  EXPECT_EQ(r.code, 0) << r.err;
  std::string text = slurp(csv);
  EXPECT_EQ(text.rfind("t_s,gpu,energy_j,", 0), 0u);
  EXPECT_GE(lines(text), 4);
  EXPECT_EQ(gearshift({"monitor", "--csv", "/nonexistent/d/x.csv", "--", "true"}, {}).code, 2);
  EXPECT_EQ(gearshift({"monitor", "--interval-ms", "0", "--", "true"}, {}).code, 2);
  EXPECT_EQ(gearshift({"monitor"}, {}).code, 2);
}

// --timeline: each GPU's sampled SM clock, memory clock and power as Trace Event counter tracks (issue 17).
TEST(MonitorCli, TimelineHoldsEachGpusClockAndPowerTracks) {
  const std::string f = ::testing::TempDir() + "monitor_timeline.json";
  Proc r = gearshift({"monitor", "--interval-ms", "20", "--timeline", f, "--", "sleep", "0.3"},
                     {"GEARSHIFT_SIMGPU_POWER_W=250", "GEARSHIFT_SIMGPU_COUNT=2"});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.err.find("timeline written to " + f), std::string::npos) << r.err;
  const auto doc = nlohmann::json::parse(slurp(f));
  std::map<std::pair<int, std::string>, int> points;
  for (const auto& e : doc["traceEvents"]) {
    ASSERT_TRUE(e["ph"] == "C" || e["ph"] == "M") << e.dump();
    if (e["ph"] != "C") continue;
    ASSERT_TRUE(e["ts"].is_number() && e["args"]["value"].is_number()) << e.dump();
    ++points[{e["pid"].get<int>(), e["name"].get<std::string>()}];
    if (e["name"] == "power (W)") {
      EXPECT_DOUBLE_EQ(e["args"]["value"].get<double>(), 250.0);
    }
    if (e["name"] == "SM clock (MHz)") {
      EXPECT_EQ(e["args"]["value"].get<double>(), 1980.0);
    }
  }
  for (int gpu : {0, 1})
    for (const char* name : {"SM clock (MHz)", "memory clock (MHz)", "power (W)"})
      EXPECT_GE((points[{gpu, name}]), 5) << gpu << " " << name;  // 0.3 s at 20 ms
  EXPECT_EQ(gearshift({"monitor", "--timeline", "/nonexistent/d/t.json", "--", "true"}, {}).code, 2);
}

TEST(GpusCli, ListsSimulatedGpuReadOnly) {
  std::string state = ::testing::TempDir() + "gpus_cli_state";
  std::remove((state + ".clocklog").c_str());
  Proc r = gearshift({"gpus"}, {"GEARSHIFT_SIMGPU_POWER_W=120", "GEARSHIFT_SIMGPU_STATE=" + state});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("GPU 0: NVIDIA H200 SXM 141GB (simulated)"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("memory 3201 MHz: SM 345-1980 MHz (110 values)"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("120.0 W instant"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("may set clocks"), std::string::npos);
  EXPECT_EQ(slurp(state + ".clocklog"), "");  // the probe wrote no clock
  Proc s = gearshift({"gpus", "--spec", "h200"}, {});
  EXPECT_EQ(s.code, 0);
  EXPECT_NE(s.out.find("NVIDIA H200 SXM 141GB (h200)"), std::string::npos);
  Proc n = gearshift({"gpus"}, {"GEARSHIFT_NVML_LIBRARY=/nonexistent/lib.so"});
  EXPECT_EQ(n.code, 5);
}

}  // namespace
