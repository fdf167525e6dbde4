#include "feed/protocol.hpp"

#include <charconv>
#include <cstdlib>
#include <limits>

namespace gearshift::feed {

namespace {

// One field: at least one space, then a decimal integer.
template <typename T>
bool number(std::string_view& s, T& v) {
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

template <typename T>
void append_number(std::string& out, T v) {
  char buf[24];
  auto [p, ec] = std::to_chars(buf, buf + sizeof buf, v);
  out.append(buf, p);
}

// "<kind> <v1> <v2> ..." (no newline).
template <typename... T>
void append_fields(std::string& out, char kind, T... values) {
  out += kind;
  ((out += ' ', append_number(out, values)), ...);
}

// Text that must stay on its line.
void append_one_line(std::string& out, std::string_view text) {
  for (char c : text) out += c == '\n' || c == '\r' ? ' ' : c;
}

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
    if (!small_id(line, e.device)) return std::nullopt;
    if (only_spaces(line)) return e;
    if (!number(line, e.name_id) || e.name_id < 0 || !only_spaces(line)) return std::nullopt;
    return e;
  }
  if (kind == 'N') {
    e.kind = FeedEvent::Kind::name;
    if (!number(line, e.name_id) || e.name_id < 0 || line.size() < 2 || line.front() != ' ') return std::nullopt;
    e.name = line.substr(1);
    return e;
  }
  if (kind == 'Y') {
    e.kind = FeedEvent::Kind::copy;
    if (!number(line, e.correlation) || !number(line, e.gpu_start_ns) || !number(line, e.gpu_end_ns) ||
        e.gpu_end_ns < e.gpu_start_ns || !small_id(line, e.stream) || !small_id(line, e.device) ||
        !number(line, e.bytes) || e.bytes < 0)
      return std::nullopt;
    // " c label" or " s label"
    if (line.size() < 4 || line[0] != ' ' || (line[1] != 'c' && line[1] != 's') || line[2] != ' ') return std::nullopt;
    e.memset = line[1] == 's';
    e.name = line.substr(3);
    if (only_spaces(e.name)) return std::nullopt;
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

void append_launch_line(std::string& out, std::int64_t cpu_ns, std::int64_t correlation, std::string_view name) {
  append_fields(out, 'L', cpu_ns, correlation);
  out += ' ';
  append_one_line(out, name);
  out += '\n';
}

void append_completion_line(std::string& out, std::int64_t correlation, std::int64_t start_ns, std::int64_t end_ns,
                            std::uint32_t stream, std::uint32_t device, std::int64_t name_id) {
  append_fields(out, 'C', correlation, start_ns, end_ns, stream, device);
  if (name_id >= 0) {
    out += ' ';
    append_number(out, name_id);
  }
  out += '\n';
}

void append_name_line(std::string& out, std::int64_t name_id, std::string_view name) {
  append_fields(out, 'N', name_id);
  out += ' ';
  append_one_line(out, name);
  out += '\n';
}

void append_sync_line(std::string& out, std::int64_t correlation, std::int64_t enter_ns, std::int64_t exit_ns) {
  append_fields(out, 'S', correlation, enter_ns, exit_ns);
  out += '\n';
}

void append_marker_line(std::string& out, std::int64_t correlation, std::int64_t not_before_ns,
                        std::int64_t seen_ns) {
  append_fields(out, 'M', correlation, not_before_ns, seen_ns);
  out += '\n';
}

void append_copy_line(std::string& out, std::int64_t correlation, std::int64_t start_ns, std::int64_t end_ns,
                      std::uint32_t stream, std::uint32_t device, std::int64_t bytes, bool memset,
                      std::string_view label) {
  append_fields(out, 'Y', correlation, start_ns, end_ns, stream, device, bytes);
  out += memset ? " s " : " c ";
  append_one_line(out, label.empty() ? std::string_view(memset ? "Memset" : "Memcpy") : label);
  out += '\n';
}

void append_hello_line(std::string& out, const Hello& h) {
  append_fields(out, 'H', h.version, h.pid, h.rank, h.local_rank, h.world_size);
  if (!h.cuda_visible_devices) {
    out += " -\n";
    return;
  }
  out += " =";
  append_one_line(out, *h.cuda_visible_devices);
  out += '\n';
}

std::optional<Hello> parse_hello_line(std::string_view line) {
  if (line.size() < 3 || line[0] != 'H' || line[1] != ' ') return std::nullopt;
  line.remove_prefix(1);
  Hello h;
  if (!number(line, h.version) || h.version != kHelloVersion || !number(line, h.pid) || h.pid <= 0 ||
      !number(line, h.rank) || !number(line, h.local_rank) || !number(line, h.world_size))
    return std::nullopt;
  if (h.rank < -1 || h.local_rank < -1 || h.world_size < -1) return std::nullopt;
  if (line.size() < 2 || line[0] != ' ') return std::nullopt;
  while (!line.empty() && line.front() == ' ') line.remove_prefix(1);
  if (line == "-" || (line.starts_with('-') && only_spaces(line.substr(1)))) return h;
  if (line.empty() || line.front() != '=') return std::nullopt;
  h.cuda_visible_devices = std::string(line.substr(1));
  return h;
}

namespace {
// The first of `names` whose value is a whole number >= 0; -1 when none is.
int first_number(const std::function<const char*(const char*)>& getenv, std::initializer_list<const char*> names) {
  for (const char* n : names) {
    const char* v = getenv(n);
    if (v == nullptr || *v == '\0') continue;
    const std::string_view s(v);
    int x = -1;
    auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), x);
    if (ec == std::errc() && p == s.data() + s.size() && x >= 0) return x;
  }
  return -1;
}
}  // namespace

Hello hello_from_env(std::int64_t pid, const std::function<const char*(const char*)>& getenv) {
  Hello h;
  h.pid = pid;
  h.rank = first_number(getenv, {"RANK", "SLURM_PROCID", "OMPI_COMM_WORLD_RANK"});
  h.local_rank = first_number(getenv, {"LOCAL_RANK", "SLURM_LOCALID", "OMPI_COMM_WORLD_LOCAL_RANK"});
  h.world_size = first_number(getenv, {"WORLD_SIZE", "SLURM_NTASKS", "OMPI_COMM_WORLD_SIZE"});
  if (const char* v = getenv("CUDA_VISIBLE_DEVICES")) h.cuda_visible_devices = std::string(v);
  return h;
}

std::optional<ControlCommand> parse_control_line(std::string_view line) {
  if (line.empty()) return std::nullopt;
  const char kind = line.front();
  line.remove_prefix(1);
  ControlCommand c;
  if (kind == 'A') {
    int period_ms = 0, window_ms = 0;
    if (!number(line, period_ms) || !number(line, window_ms) || period_ms < 0 || window_ms < 0) return std::nullopt;
    if (period_ms > 0 && window_ms > period_ms) return std::nullopt;
    c.windows = ControlCommand::Windows{std::int64_t{period_ms} * 1'000'000, std::int64_t{window_ms} * 1'000'000};
  } else if (kind == 'M') {
    int us = 0;
    if (!number(line, us) || us < 0) return std::nullopt;
    c.marker_period_ns = std::int64_t{us} * 1'000;
  } else if (kind == 'O') {
    c.off = true;
  } else {
    return std::nullopt;
  }
  if (!only_spaces(line)) return std::nullopt;
  return c;
}

std::string activity_command(std::int64_t period_ns, std::int64_t window_ns) {
  std::string s;
  append_fields(s, 'A', period_ns / 1'000'000, window_ns / 1'000'000);
  return s + '\n';
}

std::string marker_command(std::int64_t period_ns) {
  std::string s;
  append_fields(s, 'M', period_ns / 1'000);
  return s + '\n';
}

std::string off_command() { return "O\n"; }

}  // namespace gearshift::feed
