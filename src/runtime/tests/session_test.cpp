// runtime::Session, the one assembly of a live run (`gearshift run`, the Python runtime): dry-run through its
// feed pipe, apply on the simulated GPU (lock, watchdog, restore at stop), and every refusal before a clock is
// touched, each with its kind.
#include "runtime/session.hpp"

#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace gearshift::runtime {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;

struct Tmp {
  fs::path dir;
  Tmp() {
    char t[] = "/tmp/gearshift-session-XXXXXX";
    dir = mkdtemp(t);
  }
  ~Tmp() { fs::remove_all(dir); }
};

// One simulated H200 for the whole suite (the simulated GPU reads its environment at nvmlInit).
class SimGpu : public ::testing::Environment {
 public:
  void SetUp() override {
    setenv("GEARSHIFT_NVML_LIBRARY", GEARSHIFT_SIMGPU_PATH, 1);
    setenv("GEARSHIFT_SIMGPU_STATE", (tmp.dir / "sim.state").c_str(), 1);
    setenv("GEARSHIFT_LOCK_DIR", (tmp.dir / "locks").c_str(), 1);
  }
  static std::vector<std::string> clocklog() {
    std::vector<std::string> lines;
    std::ifstream in((tmp.dir / "sim.state").string() + ".clocklog");
    for (std::string l; std::getline(in, l);) lines.push_back(l);
    return lines;
  }
  static Tmp tmp;
};
Tmp SimGpu::tmp;
const auto* const kEnv = ::testing::AddGlobalTestEnvironment(new SimGpu);

ClockPlan plan4() {
  ClockPlan p;
  p.gpu = "h200";
  p.period_ns = 4e6;
  p.default_clocks = {1980, 3201};
  for (int i = 0; i < 4; ++i)
    p.positions.push_back({std::string(1, static_cast<char>('a' + i)), 1e6, i * 1e6,
                           i < 2 ? model::ClockPair{1200, 3201} : model::ClockPair{1980, 3201}});
  return p;
}

// `steps` steps of plan4's kernels: every launch, then every completion, 1 ms apart (as the live test).
std::vector<std::string> feed_lines(int steps) {
  std::vector<std::string> out;
  const std::int64_t t0 = monotonic_ns();
  for (int k = 0; k < steps * 4; ++k)
    out.push_back("L " + std::to_string(t0) + " " + std::to_string(k) + " " + std::string(1, static_cast<char>('a' + k % 4)));
  for (int k = 0; k < steps * 4; ++k) {
    const std::int64_t start = t0 + k * 1'000'000;
    out.push_back("C " + std::to_string(k) + " " + std::to_string(start) + " " + std::to_string(start + 1'000'000));
  }
  return out;
}

std::size_t lines_in(const fs::path& p) {
  std::ifstream in(p);
  std::size_t n = 0;
  for (std::string l; std::getline(in, l);) ++n;
  return n;
}

SessionError::Kind kind_of(const SessionOptions& o, std::string* what = nullptr) {
  try {
    Session s(o);
  } catch (const SessionError& e) {
    if (what) *what = e.what();
    return e.kind();
  }
  ADD_FAILURE() << "no SessionError";
  return SessionError::Kind::kFailure;
}

TEST(Session, DryRunReadsItsPipeAndLogsEveryIntendedChange) {
  Tmp t;
  SessionOptions o;
  o.dry_run_log = (t.dir / "dry.jsonl").string();
  o.pipe_feed = true;
  Session s(o);
  ASSERT_GE(s.feed_fd(), 0);
  EXPECT_FALSE(s.writes_clocks());
  EXPECT_FALSE(s.feed_line("L 1 0 a"));  // before start: dropped
  EXPECT_EQ(s.live(), nullptr);
  s.start(plan4(), {.switch_latency_ns = 0});
  ASSERT_NE(s.live(), nullptr);
  EXPECT_THROW(s.start(plan4(), {}), std::logic_error);
  for (const auto& l : feed_lines(50)) {
    const std::string line = l + "\n";
    ASSERT_EQ(write(s.feed_fd(), line.data(), line.size()), static_cast<ssize_t>(line.size()));
  }
  const SessionStats st = s.stop();  // joins the reader: every line written was handled
  EXPECT_TRUE(st.started);
  EXPECT_FALSE(st.wrote_clocks);
  EXPECT_EQ(st.live.launches, 200u);
  EXPECT_EQ(st.live.steps, 50u);
  EXPECT_EQ(st.live.predicted, 196u);  // every launch after the first step
  EXPECT_GE(st.live.changes, 1u);
  EXPECT_EQ(st.dry_run_changes, st.live.changes);
  EXPECT_EQ(lines_in(t.dir / "dry.jsonl"), st.dry_run_changes);  // flushed by stop()
  EXPECT_EQ(s.feed_fd(), -1);
  EXPECT_EQ(s.live(), nullptr);
  EXPECT_FALSE(s.feed_line("L 1 0 a"));  // after stop: dropped
  EXPECT_EQ(s.stop().live.launches, 200u);  // idempotent
  EXPECT_THROW(s.start(plan4(), {}), std::logic_error);
}

TEST(Session, RecordsEveryIntendedChangeForTheTimeline) {
  SessionOptions o;
  o.record_changes = true;
  Session s(o);
  s.start(plan4(), {.switch_latency_ns = 0});
  for (const auto& l : feed_lines(20)) ASSERT_TRUE(s.feed(*feed::parse_feed_line(l)));
  const SessionStats st = s.stop();
  ASSERT_GE(st.live.changes, 1u);
  const auto changes = s.changes();
  EXPECT_EQ(changes.size(), st.live.changes);
  EXPECT_FALSE(s.changes_lost());
  EXPECT_TRUE(changes.front().clocks.sm_mhz == 1200 || changes.front().clocks.sm_mhz == 1980);
}

TEST(Session, NeverStartedStopsWithZeroStats) {
  Session s(SessionOptions{});
  const SessionStats st = s.stop();
  EXPECT_FALSE(st.started);
  EXPECT_EQ(st.live.launches, 0u);
  EXPECT_EQ(st.dry_run_changes, 0u);
}

TEST(Session, AppliesOnTheSimulatedGpuHoldsItsLockAndRestoresAtStop) {
  const std::size_t before = SimGpu::clocklog().size();
  SessionOptions o;
  o.apply = true;
  o.watchdog_exe = GEARSHIFT_BINARY;
  SessionStats st;
  {
    Session s(o);
    EXPECT_TRUE(s.writes_clocks());
    std::string what;
    EXPECT_EQ(kind_of(o, &what), SessionError::Kind::kGpuBusy);  // one owner per GPU
    EXPECT_THAT(what, HasSubstr(std::to_string(getpid())));
    s.start(plan4(), {.switch_latency_ns = 0});
    for (const auto& l : feed_lines(20)) ASSERT_TRUE(s.feed_line(l));
    st = s.stop();
  }
  EXPECT_TRUE(st.wrote_clocks);
  EXPECT_EQ(st.dry_run_changes, 0u);
  ASSERT_GE(st.live.changes, 1u);
  const auto log = SimGpu::clocklog();
  ASSERT_GT(log.size(), before);
  // The changes went to NVML (the first is the defaults while the predictor searches; the low clocks' time comes
  // later than this test waits), and nothing was left locked.
  std::size_t sets = 0;
  for (std::size_t i = before; i < log.size(); ++i) sets += log[i].find("set-sm") != std::string::npos;
  EXPECT_GE(sets, 1u) << ::testing::PrintToString(log);
  EXPECT_THAT(log.back(), HasSubstr("reset"));  // restored at stop
  Session again(o);  // the lock was released
  EXPECT_TRUE(again.writes_clocks());
}

TEST(Session, RefusesBeforeTouchingAClock) {
  Tmp t;
  SessionOptions o;
  o.apply = true;
  o.gpu = 3;  // the simulated machine has one GPU
  std::string what;
  EXPECT_EQ(kind_of(o, &what), SessionError::Kind::kNoGpu);
  EXPECT_THAT(what, HasSubstr("GPU 3 does not exist (NVML sees 1)"));

  SessionOptions bad_log;
  bad_log.dry_run_log = (t.dir / "no-such-dir" / "dry.jsonl").string();
  EXPECT_EQ(kind_of(bad_log), SessionError::Kind::kBadOutput);

  const std::string lib = std::getenv("GEARSHIFT_NVML_LIBRARY");
  setenv("GEARSHIFT_NVML_LIBRARY", (t.dir / "missing.so").c_str(), 1);
  SessionOptions no_nvml;
  no_nvml.apply = true;
  EXPECT_EQ(kind_of(no_nvml, &what), SessionError::Kind::kNoGpu);
  EXPECT_THAT(what, HasSubstr("no NVIDIA driver here?"));
  Session dry(SessionOptions{});  // dry-run needs no NVML
  EXPECT_FALSE(dry.writes_clocks());
  setenv("GEARSHIFT_NVML_LIBRARY", lib.c_str(), 1);
}

}  // namespace
}  // namespace gearshift::runtime
