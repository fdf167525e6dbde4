#include "cupti/config.hpp"

#include <charconv>
#include <cmath>
#include <string_view>

namespace gearshift::cupti {
namespace {

template <typename T>
bool parse_number(std::string_view s, T& out) {
  T v{};
  auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc() || p != s.data() + s.size()) return false;
  out = v;
  return true;
}

}  // namespace

TracerConfig config_from_env(const std::function<const char*(const char*)>& getenv,
                             std::vector<std::string>* warnings) {
  TracerConfig c;
  auto str = [&](const char* k) -> std::string {
    const char* v = getenv(k);
    return v != nullptr ? std::string(v) : std::string();
  };
  auto warn = [&](const char* k, const std::string& v, const char* what) {
    if (warnings != nullptr) warnings->push_back(std::string(k) + "='" + v + "' is not " + what + "; ignored");
  };
  c.output = str(kEnvOutput);
  c.chrome_output = str(kEnvChrome);
  c.cupti_library = str(kEnvCuptiLibrary);
  c.quiet = str(kEnvQuiet) == "1";
  c.all_ranges = str(kEnvAllRanges) == "1";
  auto integer = [&](const char* k, auto& field, long long lo, long long hi) {
    std::string v = str(k);
    if (v.empty()) return;
    long long x = 0;
    if (!parse_number(v, x) || x < lo || x > hi) {
      warn(k, v, ("an integer in [" + std::to_string(lo) + ", " + std::to_string(hi) + "]").c_str());
      return;
    }
    field = static_cast<std::remove_reference_t<decltype(field)>>(x);
  };
  integer(kEnvSteps, c.steps, 0, 1'000'000'000);
  std::size_t buffer_mb = c.buffer_bytes >> 20;
  integer(kEnvBufferMb, buffer_mb, 1, 1024);
  c.buffer_bytes = buffer_mb << 20;
  integer(kEnvMaxBuffers, c.max_buffers, 1, 4096);
  integer(kEnvSampleMs, c.sample_period_ms, 0, 60'000);
  integer(kEnvFlushMs, c.flush_period_ms, 0, 600'000);
  integer(kEnvMaxRecords, c.max_records, 1, 1'000'000'000'000);
  integer(kEnvRuntimeFd, c.runtime_fd, 0, 1'000'000);
  integer(kEnvControlFd, c.control_fd, 0, 1'000'000);
  integer(kEnvFeedFlushMs, c.feed_flush_ms, 1, 60'000);
  integer(kEnvFeedPeriodUs, c.feed_period_us, 50, 1'000'000);
  integer(kEnvFeedActivityPeriodMs, c.feed_activity_period_ms, 0, 60'000);
  integer(kEnvFeedActivityWindowMs, c.feed_activity_window_ms, 0, 60'000);
  integer(kEnvFeedMarkerUs, c.feed_marker_us, 0, 60'000'000);
  if (c.feed_activity_period_ms > 0 && c.feed_activity_window_ms > c.feed_activity_period_ms) {
    warn(kEnvFeedActivityWindowMs, std::to_string(c.feed_activity_window_ms),
         ("at most " + std::string(kEnvFeedActivityPeriodMs) + " (" + std::to_string(c.feed_activity_period_ms) +
          "), so every kernel is recorded")
             .c_str());
    c.feed_activity_period_ms = c.feed_activity_window_ms = 0;
  }
  if (std::string v = str(kEnvDuration); !v.empty()) {
    double d = 0;
    if (!parse_number(v, d) || !std::isfinite(d) || d < 0) warn(kEnvDuration, v, "a number of seconds >= 0");
    else c.duration_s = d;
  }
  return c;
}

bool is_step_marker(std::string_view name) {
  return name.starts_with("gearshift.step") || name.starts_with("ProfilerStep#");
}

}  // namespace gearshift::cupti
