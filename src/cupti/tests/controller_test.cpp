#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <filesystem>
#include <mutex>
#include <utility>
#include <vector>
#include <thread>

#include "cupti/controller.hpp"
#include "trace/gearshift_format.hpp"

using namespace gearshift;
using namespace gearshift::cupti;

namespace {

class FakeClocks final : public ClockSource {
 public:
  int device_count() const override { return 2; }
  ClockReading read(int d) noexcept override { return ClockReading{d == 0 ? 1980 : 1410, 3201, 650'000}; }
  std::string device_name(int) const override { return "fake"; }
};

// Waits (bounded) for a condition set by the controller thread; asserts on the outcome, not on time.
template <typename F>
bool eventually(F f) {
  for (int i = 0; i < 5000 && !f(); ++i) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  return f();
}

std::string temp_path(const std::string& name) {
  return (std::filesystem::path(::testing::TempDir()) / ("gearshift_ctl_" + name)).string();
}

}  // namespace

TEST(Controller, SamplesEveryDeviceAndFlushes) {
  TracerConfig c;
  c.output = temp_path("samples.jsonl.gz");
  Tracer t(c, nullptr, "test", "", "{}");
  FakeClocks clocks;
  std::atomic<std::int64_t> now{1000};
  std::atomic<int> flushes{0};
  {
    Controller ctl(&t, &clocks, ControllerHooks{[&] { return now.fetch_add(1000); }, [&] { ++flushes; }, {}}, 1'000'000, 1'000'000, 0);
    EXPECT_TRUE(eventually([&] { return t.stats().samples >= 6 && flushes.load() >= 1; }));
  }
  t.finish(true, "");
  auto tr = trace::read_gearshift_trace(c.output);
  ASSERT_GE(tr.samples.size(), 6u);
  int dev1 = 0;
  for (const auto& s : tr.samples) {
    if (s.device == 1) {
      ++dev1;
      EXPECT_EQ(s.sm_clock_mhz, 1410);
    }
    EXPECT_EQ(s.power_mw, 650'000);
  }
  EXPECT_GE(dev1, 3);
}

TEST(Controller, StopsOnceAfterTheDuration) {
  TracerConfig c;
  c.output = temp_path("duration.jsonl.gz");
  Tracer t(c, nullptr, "test", "", "{}");
  std::atomic<std::int64_t> now{0};
  std::atomic<int> stops{0};
  std::string reason;
  Controller ctl(&t, nullptr,
                 ControllerHooks{[&] { return now.load(); }, {},
                                 [&](const std::string& r) {
                                   reason = r;
                                   ++stops;
                                 }},
                 0, 0, 2'000'000'000);  // 2 s
  now = 3'000'000'000;  // 3 s of trace clock later
  EXPECT_TRUE(eventually([&] { return stops.load() == 1; }));
  ctl.shutdown();
  EXPECT_EQ(stops.load(), 1);
  EXPECT_EQ(reason, "traced for the requested duration");
}

TEST(Controller, StopsWhenTheTracerAsks) {
  TracerConfig c;
  c.output = temp_path("ask.jsonl.gz");
  c.max_records = 1;
  Tracer t(c, nullptr, "test", "", "{}");
  std::atomic<int> stops{0};
  Controller ctl(&t, nullptr, ControllerHooks{[] { return std::int64_t{0}; }, {}, [&](const std::string&) { ++stops; }},
                 0, 0, 0);
  GpuActivity a;
  a.name = "k";
  t.add(a);
  EXPECT_TRUE(eventually([&] { return stops.load() == 1; }));
}

// Sampled kernel activity: on for the window, off for the rest of each period, alternating; a command from the
// runtime (the control hook) replaces the windows: "every kernel" turns activity on for good.
TEST(Controller, OpensActivityWindowsAndFollowsTheRuntimesCommand) {
  std::mutex mu;
  std::vector<bool> toggles, every;
  std::vector<std::chrono::steady_clock::time_point> at;
  std::atomic<bool> send{false};
  ControllerHooks hooks{[] { return std::int64_t{0}; }, {}, {}};
  hooks.kernel_activity = [&](bool on, bool every_kernel) {
    std::lock_guard lock(mu);
    toggles.push_back(on);
    every.push_back(every_kernel);
    at.push_back(std::chrono::steady_clock::now());
  };
  hooks.control = [&]() -> ControlPoll {
    if (send.exchange(false)) return ControlPoll{ActivityWindows{0, 0}};
    return {};
  };
  auto count = [&] {
    std::lock_guard lock(mu);
    return toggles.size();
  };
  Controller ctl(nullptr, nullptr, hooks, 1'000'000, 0, 0, ActivityWindows{20'000'000, 5'000'000}, /*activity_on=*/false);
  ASSERT_TRUE(eventually([&] { return count() >= 6; }));
  {
    std::lock_guard lock(mu);
    for (std::size_t i = 0; i < toggles.size(); ++i) EXPECT_EQ(toggles[i], i % 2 == 0) << i;  // on, off, on, ...
    for (std::size_t i = 0; i < every.size(); ++i) EXPECT_FALSE(every[i]) << i;  // sampled: kernels, no copies
    // On for the 5 ms window, off for the other 15 ms of each period (summed over the first windows, so that
    // a late wake-up of this loaded test machine does not decide it).
    std::chrono::steady_clock::duration on{}, off{};
    for (std::size_t i = 0; i + 1 < 6; ++i) (i % 2 == 0 ? on : off) += at[i + 1] - at[i];
    EXPECT_LT(on, off);
  }
  EXPECT_GE(ctl.windows_opened(), 3u);
  send = true;
  ASSERT_TRUE(eventually([&] { return ctl.windows().period_ns == 0; }));
  ASSERT_TRUE(eventually([&] {
    std::lock_guard lock(mu);
    return toggles.back();
  }));
  const std::size_t after = count();
  std::this_thread::sleep_for(std::chrono::milliseconds(60));  // three former periods: no toggle any more
  EXPECT_EQ(count(), after);
  ctl.shutdown();
}

// The kernel_activity calls a controller makes, and an "every kernel" command (A 0 0) to send it on request.
struct ActivityLog {
  std::mutex mu;
  std::vector<std::pair<bool, bool>> toggles;  // (on, every_kernel)
  std::atomic<bool> send{false};
  ControllerHooks hooks() {
    ControllerHooks h{[] { return std::int64_t{0}; }, {}, {}};
    h.kernel_activity = [this](bool on, bool every_kernel) {
      std::lock_guard lock(mu);
      toggles.emplace_back(on, every_kernel);
    };
    h.control = [this]() -> ControlPoll {
      if (send.exchange(false)) return ControlPoll{ActivityWindows{0, 0}};
      return {};
    };
    return h;
  }
  std::vector<std::pair<bool, bool>> seen() {
    std::lock_guard lock(mu);
    return toggles;
  }
};

// From no activity to every kernel's (`run --auto` collecting after a window-0 start): on, for every kernel, so
// that the feed records copies and memsets too; sampled windows (above) turn kernels on without them.
TEST(Controller, EveryKernelsActivityIsSaidSo) {
  ActivityLog log;
  Controller ctl(nullptr, nullptr, log.hooks(), 1'000'000, 0, 0, ActivityWindows{10'000'000, 0},
                 /*activity_on=*/false);
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  EXPECT_TRUE(log.seen().empty());  // window 0 and off already: nothing to toggle
  log.send = true;
  ASSERT_TRUE(eventually([&] { return !log.seen().empty(); }));
  ctl.shutdown();
  const auto t = log.seen();
  ASSERT_EQ(t.size(), 1u);
  EXPECT_EQ(t[0], std::make_pair(true, true));
}

// A sampled window open when every kernel is asked for: activity stays on, and the hook is told it is now for every
// kernel (copies and memsets on). Before, nothing was called (activity was on already): the copies stayed off, or
// on, by timing.
TEST(Controller, AnOpenWindowTurnedToEveryKernelIsSaidSo) {
  ActivityLog log;
  // A 5 s window of every 10 s: open from the start, for the whole test.
  Controller ctl(nullptr, nullptr, log.hooks(), 1'000'000, 0, 0, ActivityWindows{10'000'000'000, 5'000'000'000},
                 /*activity_on=*/false);
  ASSERT_TRUE(eventually([&] { return !log.seen().empty(); }));
  log.send = true;
  ASSERT_TRUE(eventually([&] { return log.seen().size() >= 2; }));
  ctl.shutdown();
  const auto t = log.seen();
  ASSERT_EQ(t.size(), 2u);
  EXPECT_EQ(t[0], std::make_pair(true, false));  // the window: kernels only
  EXPECT_EQ(t[1], std::make_pair(true, true));   // every kernel: copies and memsets too
  EXPECT_EQ(ctl.windows_opened(), 1u);           // still the one window
}

// Window 0: kernel activity off for good (the launch callbacks alone).
TEST(Controller, WindowZeroTurnsActivityOffOnce) {
  std::atomic<int> on{0}, off{0};
  ControllerHooks hooks{[] { return std::int64_t{0}; }, {}, {}};
  hooks.kernel_activity = [&](bool v, bool) { ++(v ? on : off); };
  Controller ctl(nullptr, nullptr, hooks, 1'000'000, 0, 0, ActivityWindows{10'000'000, 0}, /*activity_on=*/true);
  ASSERT_TRUE(eventually([&] { return off.load() == 1; }));
  std::this_thread::sleep_for(std::chrono::milliseconds(30));
  ctl.shutdown();
  EXPECT_EQ(off.load(), 1);
  EXPECT_EQ(on.load(), 0);
}

// The runtime turns the feed off: the off hook runs once, on the controller's thread, and the thread ends: no
// window opens, and nothing is flushed, after it.
TEST(Controller, TheFeedOffEndsTheThreadAfterItsHook) {
  std::atomic<int> on{0}, off_calls{0}, flushes{0}, flushes_at_off{-1};
  std::atomic<bool> send{false};
  ControllerHooks hooks{[] { return std::int64_t{0}; }, [&] { ++flushes; }, {}};
  hooks.kernel_activity = [&](bool v, bool) { on += v ? 1 : 0; };
  hooks.control = [&]() -> ControlPoll { return ControlPoll{std::nullopt, send.load()}; };
  hooks.off = [&] {
    flushes_at_off = flushes.load();
    ++off_calls;
  };
  Controller ctl(nullptr, nullptr, hooks, 1'000'000, 2'000'000, 0, ActivityWindows{10'000'000, 2'000'000},
                 /*activity_on=*/false);
  ASSERT_TRUE(eventually([&] { return on.load() >= 2 && flushes.load() >= 2; }));
  send = true;
  ASSERT_TRUE(eventually([&] { return off_calls.load() == 1; }));
  const int windows = on.load();
  std::this_thread::sleep_for(std::chrono::milliseconds(40));  // four former periods
  EXPECT_EQ(off_calls.load(), 1);
  EXPECT_EQ(on.load(), windows);
  EXPECT_EQ(flushes.load(), flushes_at_off.load());
  ctl.shutdown();  // the thread has ended already: joins at once
}
