#include "cupti/config.hpp"

#include <charconv>
#include <cmath>
#include <string_view>

#include "feed/socket.hpp"

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
  c.cupti_library = str(kEnvCuptiLibrary);
  c.quiet = str(kEnvQuiet) == "1";
  c.all_ranges = str(kEnvAllRanges) == "1";
  // The injected library no longer writes Chrome JSON (the CLI does, with counter tracks): one writer.
  if (const std::string v = str(kEnvChrome); !v.empty() && warnings != nullptr)
    warnings->push_back(std::string(kEnvChrome) + "='" + v + "' is no longer read: `gearshift trace --chrome FILE` writes the Chrome trace");
  // `scale`: the field's unit in the variable's (ns per ms, ...).
  auto integer = [&](const char* k, auto& field, long long lo, long long hi, long long scale = 1) {
    std::string v = str(k);
    if (v.empty()) return;
    long long x = 0;
    if (!parse_number(v, x) || x < lo || x > hi) {
      warn(k, v, ("an integer in [" + std::to_string(lo) + ", " + std::to_string(hi) + "]").c_str());
      return;
    }
    field = static_cast<std::remove_reference_t<decltype(field)>>(x * scale);
  };
  integer(kEnvSteps, c.steps, 0, 1'000'000'000);
  std::size_t buffer_mb = c.buffer_bytes >> 20;
  integer(kEnvBufferMb, buffer_mb, 1, 1024);
  c.buffer_bytes = buffer_mb << 20;
  integer(kEnvMaxBuffers, c.max_buffers, 1, 4096);
  constexpr long long kNsPerMs = 1'000'000, kNsPerUs = 1'000;
  integer(kEnvSampleMs, c.sample_period_ns, 0, 60'000, kNsPerMs);
  integer(kEnvFlushMs, c.flush_period_ns, 0, 600'000, kNsPerMs);
  integer(kEnvMaxRecords, c.max_records, 1, 1'000'000'000'000);
  c.runtime_socket = str(feed::kEnvSocket);
  if (std::string t = str(kEnvTraceTag); !t.empty()) {
    if (t.size() <= 32 && t.find_first_not_of("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789") ==
                              std::string::npos)
      c.trace_tag = t;
    else
      warn(kEnvTraceTag, t, "up to 32 letters and digits");
  }
  integer(kEnvFeedFlushMs, c.feed_flush_ns, 1, 60'000, kNsPerMs);
  integer(kEnvFeedPeriodUs, c.feed_period_ns, 50, 1'000'000, kNsPerUs);
  integer(kEnvFeedActivityPeriodMs, c.feed_activity_period_ns, 0, 60'000, kNsPerMs);
  integer(kEnvFeedActivityWindowMs, c.feed_activity_window_ns, 0, 60'000, kNsPerMs);
  integer(kEnvFeedMarkerUs, c.feed_marker_ns, 0, 60'000'000, kNsPerUs);
  if (c.feed_activity_period_ns > 0 && c.feed_activity_window_ns > c.feed_activity_period_ns) {
    warn(kEnvFeedActivityWindowMs, std::to_string(c.feed_activity_window_ns / kNsPerMs),
         ("at most " + std::string(kEnvFeedActivityPeriodMs) + " (" +
          std::to_string(c.feed_activity_period_ns / kNsPerMs) + "), so every kernel is recorded")
             .c_str());
    c.feed_activity_period_ns = c.feed_activity_window_ns = 0;
  }
  if (std::string v = str(kEnvDuration); !v.empty()) {
    double d = 0;
    if (!parse_number(v, d) || !std::isfinite(d) || d < 0) warn(kEnvDuration, v, "a number of seconds >= 0");
    else c.duration_ns = d >= 9.2e9 ? INT64_MAX : std::llround(d * 1e9);  // beyond ~292 years: no limit to speak of
  }
  return c;
}

std::string insert_before_extension(const std::string& path, const std::string& tag) {
  const std::size_t slash = path.rfind('/');
  const std::string_view name = std::string_view(path).substr(slash == std::string::npos ? 0 : slash + 1);
  for (std::string_view ext : {".jsonl.gz", ".json.gz", ".jsonl", ".json", ".gz"})
    if (name.size() > ext.size() && name.ends_with(ext))
      return path.substr(0, path.size() - ext.size()) + "." + tag + std::string(ext);
  return path + "." + tag;
}

std::string staging_trace_path(const std::string& output, const std::string& tag, long pid) {
  return insert_before_extension(output, "gs-" + tag + ".pid" + std::to_string(pid));
}

long staging_trace_pid(const std::string& output, const std::string& tag, const std::string& path) {
  const std::string marker = "@@PID@@";
  const std::string pattern = insert_before_extension(output, "gs-" + tag + ".pid" + marker);
  const std::size_t at = pattern.find(marker);
  const std::string before = pattern.substr(0, at), after = pattern.substr(at + marker.size());
  if (path.size() <= before.size() + after.size() || !path.starts_with(before) || !path.ends_with(after)) return -1;
  const std::string_view digits = std::string_view(path).substr(before.size(), path.size() - before.size() - after.size());
  long pid = -1;
  if (!parse_number(digits, pid) || pid <= 0) return -1;
  return pid;
}

bool is_step_marker(std::string_view name) {
  return name.starts_with("gearshift.step") || name.starts_with("ProfilerStep#");
}

}  // namespace gearshift::cupti
