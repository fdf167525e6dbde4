#include "runtime/feed.hpp"

#include <charconv>

namespace gearshift::runtime {

namespace {
bool number(std::string_view& s, std::int64_t& v) {
  while (!s.empty() && s.front() == ' ') s.remove_prefix(1);
  auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc()) return false;
  s.remove_prefix(static_cast<std::size_t>(p - s.data()));
  return true;
}
}  // namespace

bool feed_line(std::string_view line, LiveRuntime& rt) {
  if (line.size() < 3 || line[1] != ' ') return false;
  const char kind = line[0];
  line.remove_prefix(2);
  std::int64_t a = 0, b = 0, c = 0;
  if (kind == 'L') {
    if (!number(line, a) || !number(line, b) || line.size() < 2 || line.front() != ' ') return false;
    line.remove_prefix(1);
    rt.on_launch(line, b, a);
    return true;
  }
  if (kind == 'C') {
    if (!number(line, a) || !number(line, b) || !number(line, c)) return false;
    rt.on_complete(a, b, c);
    return true;
  }
  return false;
}

}  // namespace gearshift::runtime
