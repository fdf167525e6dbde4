#include "cupti/feed_control.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <charconv>

#include "trace/line_split.hpp"

namespace gearshift::cupti {

namespace {
bool field(std::string_view& s, int& v) {
  if (s.empty() || s.front() != ' ') return false;
  while (!s.empty() && s.front() == ' ') s.remove_prefix(1);
  auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc() || v < 0) return false;
  s.remove_prefix(static_cast<std::size_t>(p - s.data()));
  return true;
}
}  // namespace

std::optional<ControlCommand> parse_control_line(std::string_view line) {
  if (line.empty()) return std::nullopt;
  const char kind = line.front();
  line.remove_prefix(1);
  ControlCommand c;
  if (kind == 'A') {
    ActivityWindows w;
    if (!field(line, w.period_ms) || !field(line, w.window_ms)) return std::nullopt;
    if (w.period_ms > 0 && w.window_ms > w.period_ms) return std::nullopt;
    c.windows = w;
  } else if (kind == 'M') {
    int us = 0;
    if (!field(line, us)) return std::nullopt;
    c.marker_period_us = us;
  } else {
    return std::nullopt;
  }
  if (line.find_first_not_of(' ') != std::string_view::npos) return std::nullopt;
  return c;
}

FeedControl::FeedControl(int fd) : fd_(fd) {
  if (fd_ >= 0) {
    fcntl(fd_, F_SETFL, fcntl(fd_, F_GETFL) | O_NONBLOCK);
    fcntl(fd_, F_SETFD, FD_CLOEXEC);  // programs this one execs must not read our commands
  }
}

FeedControl::~FeedControl() {
  if (fd_ >= 0) close(fd_);
}

ControlCommand FeedControl::poll() {
  ControlCommand last;
  char chunk[512];
  while (fd_ >= 0) {
    ssize_t n = read(fd_, chunk, sizeof chunk);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) break;
    if (n <= 0) {  // end of file (gearshift gone) or an error: nothing more will come
      close(fd_);
      fd_ = -1;
      break;
    }
    trace::for_each_line(buf_, std::string_view(chunk, static_cast<std::size_t>(n)), [&](std::string_view l) {
      if (auto c = parse_control_line(l)) {
        if (c->windows) last.windows = c->windows;
        if (c->marker_period_us) last.marker_period_us = c->marker_period_us;
      } else {
        ++invalid_;
      }
    });
    if (buf_.size() > 4096) buf_.clear();  // an unfinished line that long is no valid command
  }
  return last;
}

}  // namespace gearshift::cupti
