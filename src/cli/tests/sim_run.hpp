// Helpers of the tests that run the real `gearshift` binary against the simulated GPU and the stand-in job
// (runtime_cli_test.cpp, verify_cli_test.cpp): processes with extra environment, a per-test temporary folder, the
// simulated GPU's environment and a 4-kernel plan, and plain-string readers of the summary's figures.
#pragma once

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

extern char** environ;

namespace gearshift::test {

namespace fs = std::filesystem;

inline std::string slurp(const fs::path& p) {
  std::ifstream in(p);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// Starts argv with extra environment, stdout+stderr to `out`; returns the pid.
inline pid_t start(const std::vector<std::string>& argv, const std::vector<std::string>& env, const fs::path& out) {
  std::vector<std::string> envs;
  for (char** e = environ; *e; ++e) envs.emplace_back(*e);
  for (const auto& e : env) envs.push_back(e);
  std::vector<char*> a, v;
  for (const auto& s : argv) a.push_back(const_cast<char*>(s.c_str()));
  a.push_back(nullptr);
  for (const auto& s : envs) v.push_back(const_cast<char*>(s.c_str()));
  v.push_back(nullptr);
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_addopen(&fa, 1, out.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  posix_spawn_file_actions_adddup2(&fa, 1, 2);
  pid_t pid = -1;
  int rc = posix_spawn(&pid, a[0], &fa, nullptr, a.data(), v.data());
  posix_spawn_file_actions_destroy(&fa);
  return rc == 0 ? pid : -1;
}

inline int wait_exit(pid_t pid) {
  int st = 0;
  if (waitpid(pid, &st, 0) < 0) return -1;
  return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

inline int run(const std::vector<std::string>& argv, const std::vector<std::string>& env, const fs::path& out) {
  pid_t p = start(argv, env, out);
  return p < 0 ? -1 : wait_exit(p);
}

struct Tmp {
  fs::path dir;
  Tmp() {
    dir = fs::temp_directory_path() / ("gearshift-rt-" + std::to_string(getpid()) + "-" +
                                       ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir);
    fs::create_directories(dir);
  }
  ~Tmp() { fs::remove_all(dir); }
};

// The number right after `prefix` (searched from the first `anchor`, when given); -1 when absent. Plain string
// search: std::regex trips GCC 12's -Wmaybe-uninitialized under the sanitizer build.
// The rest of the line of `text` that starts at `prefix`; "" when `prefix` is not there.
inline std::string line_from(const std::string& text, const std::string& prefix) {
  const std::size_t at = text.find(prefix);
  return at == std::string::npos ? std::string() : text.substr(at, text.find('\n', at) - at);
}

inline double number_after(const std::string& text, const std::string& prefix, const std::string& anchor = "") {
  std::size_t at = anchor.empty() ? 0 : text.find(anchor);
  if (at == std::string::npos) return -1;
  at = text.find(prefix, at);
  if (at == std::string::npos) return -1;
  const char* begin = text.c_str() + at + prefix.size();
  char* end = nullptr;
  const double v = std::strtod(begin, &end);
  return end == begin ? -1 : v;
}

// The whole number right before `suffix`; -1 when absent.
inline double number_before(const std::string& text, const std::string& suffix) {
  std::size_t at = text.find(suffix);
  if (at == std::string::npos) return -1;
  std::size_t b = at;
  while (b > 0 && std::isdigit(static_cast<unsigned char>(text[b - 1]))) --b;
  return b == at ? -1 : std::stod(text.substr(b, at - b));
}

// Four 5 ms kernels a 25 ms step: two at SM 1200 MHz, two at 1980 (`one_pair`: all four at 1200).
inline void write_plan(const fs::path& p, bool one_pair = false) {
  nlohmann::json j = {{"format", "gearshift-plan"}, {"version", 1}, {"gpu", "h200"}, {"switch_latency_us", 1000},
                      {"period_us", 25000}};
  nlohmann::json pos = nlohmann::json::array();
  for (int i = 0; i < 4; ++i)
    pos.push_back({{"name", std::string(1, static_cast<char>('a' + i))}, {"kind", "kernel"}, {"duration_us", 5000},
                   {"start_offset_us", 6000 * i},
                   {"sm_clock_mhz", i < 2 || one_pair ? 1200 : 1980}, {"mem_clock_mhz", 3201}});
  j["positions"] = pos;
  std::ofstream(p) << j.dump();
}

struct SimEnv {
  Tmp t;
  fs::path plan = t.dir / "plan.json", state = t.dir / "sim.state", log = t.dir / "dry.jsonl";
  std::vector<std::string> env{"GEARSHIFT_NVML_LIBRARY=" GEARSHIFT_SIMGPU_PATH, "GEARSHIFT_SIMGPU_STATE=" + state.string(),
                               "GEARSHIFT_LOCK_DIR=" + (t.dir / "locks").string()};
  SimEnv() { write_plan(plan); }
  std::vector<std::string> run_argv(const std::string& steps, bool apply = true, const std::string& pidfile = "") {
    std::vector<std::string> a{GEARSHIFT_BINARY, "run", "--plan", plan.string(), "--dry-run-log", log.string()};
    if (apply) a.push_back("--apply");
    a.insert(a.end(), {"--", GEARSHIFT_FAKE_JOB, plan.string(), steps});
    if (!pidfile.empty()) a.push_back(pidfile);
    return a;
  }
  std::vector<std::string> clocklog() const {
    std::vector<std::string> lines;
    std::ifstream in(state.string() + ".clocklog");
    for (std::string l; std::getline(in, l);) lines.push_back(l);
    return lines;
  }
  // Waits up to `ms` for the last clock write to be a reset of the SM clocks.
  bool reset_within(int ms) const {
    for (int i = 0; i < ms / 20; ++i) {
      auto l = clocklog();
      if (!l.empty() && l.back().find("reset") != std::string::npos &&
          std::any_of(l.begin(), l.end(), [](const std::string& s) { return s.find("set-sm") != std::string::npos; }))
        return true;
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    return false;
  }
  bool wait_for_set(int ms) const {
    for (int i = 0; i < ms / 20; ++i) {
      for (const auto& l : clocklog())
        if (l.find("set-sm 1200 1200") != std::string::npos) return true;
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    return false;
  }
};

// The body of GET `path` from 127.0.0.1:`port` (HTTP/1.0, the connection closed by the server); "" on failure.
inline std::string http_get(int port, const std::string& path) {
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return "";
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(static_cast<std::uint16_t>(port));
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  std::string got;
  if (::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0) {
    const std::string req = "GET " + path + " HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n";
    if (::write(fd, req.data(), req.size()) == static_cast<ssize_t>(req.size())) {
      char buf[4096];
      for (ssize_t n; (n = ::read(fd, buf, sizeof buf)) > 0;) got.append(buf, static_cast<std::size_t>(n));
    }
  }
  ::close(fd);
  const std::size_t body = got.find("\r\n\r\n");
  return body == std::string::npos ? "" : got.substr(body + 4);
}

// The lines of `o` naming a connected process that contain `what` (the exit summary's process list).
inline int process_lines(const std::string& o, const std::string& what) {
  int n = 0;
  std::istringstream in(o);
  for (std::string l; std::getline(in, l);)
    n += l.starts_with("  pid ") && l.find(what) != std::string::npos;
  return n;
}

}  // namespace gearshift::test
