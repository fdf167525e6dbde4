#include "runtime/feed.hpp"

#include <charconv>
#include <limits>

namespace gearshift::runtime {

namespace {

// One field: at least one space, then a decimal integer.
bool number(std::string_view& s, std::int64_t& v) {
  if (s.empty() || s.front() != ' ') return false;
  while (!s.empty() && s.front() == ' ') s.remove_prefix(1);
  auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc()) return false;
  s.remove_prefix(static_cast<std::size_t>(p - s.data()));
  return true;
}

// An optional trailing field that must fit a non-negative int32 (stream id, device ordinal).
bool small_id(std::string_view& s, std::int32_t& v) {
  std::int64_t x = 0;
  if (!number(s, x) || x < 0 || x > std::numeric_limits<std::int32_t>::max()) return false;
  v = static_cast<std::int32_t>(x);
  return true;
}

bool only_spaces(std::string_view s) { return s.find_first_not_of(' ') == std::string_view::npos; }

}  // namespace

std::optional<FeedEvent> parse_feed_line(std::string_view line) {
  if (line.size() < 3 || line[1] != ' ') return std::nullopt;
  const char kind = line[0];
  line.remove_prefix(1);  // keeps the space before the first field
  FeedEvent e;
  if (kind == 'L') {
    e.kind = FeedEvent::Kind::launch;
    if (!number(line, e.cpu_ns) || !number(line, e.correlation) || line.size() < 2 || line.front() != ' ')
      return std::nullopt;
    e.name = line.substr(1);
    return e;
  }
  if (kind == 'C') {
    e.kind = FeedEvent::Kind::complete;
    if (!number(line, e.correlation) || !number(line, e.gpu_start_ns) || !number(line, e.gpu_end_ns))
      return std::nullopt;
    if (only_spaces(line)) return e;
    if (!small_id(line, e.stream)) return std::nullopt;
    if (only_spaces(line)) return e;
    if (!small_id(line, e.device) || !only_spaces(line)) return std::nullopt;
    return e;
  }
  if (kind == 'S' || kind == 'M') {
    e.kind = kind == 'S' ? FeedEvent::Kind::sync : FeedEvent::Kind::marker;
    if (!number(line, e.correlation) || !number(line, e.gpu_start_ns) || !number(line, e.gpu_end_ns) ||
        !only_spaces(line) || e.gpu_end_ns < e.gpu_start_ns)
      return std::nullopt;
    return e;
  }
  return std::nullopt;
}

void feed_event(const FeedEvent& e, LiveRuntime& rt) {
  switch (e.kind) {
    case FeedEvent::Kind::launch: rt.on_launch(e.name, e.correlation, e.cpu_ns); break;
    case FeedEvent::Kind::complete: rt.on_complete(e.correlation, e.gpu_start_ns, e.gpu_end_ns); break;
    case FeedEvent::Kind::sync: rt.on_sync(e.correlation, e.gpu_start_ns, e.gpu_end_ns); break;
    case FeedEvent::Kind::marker: rt.on_marker(e.correlation, e.gpu_start_ns, e.gpu_end_ns); break;
  }
}

bool feed_line(std::string_view line, LiveRuntime& rt) {
  auto e = parse_feed_line(line);
  if (!e) return false;
  feed_event(*e, rt);
  return true;
}

}  // namespace gearshift::runtime
