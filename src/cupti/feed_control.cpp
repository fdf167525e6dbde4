#include "cupti/feed_control.hpp"

#include <fcntl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>

#include "feed/protocol.hpp"
#include "trace/line_split.hpp"

namespace gearshift::cupti {

FeedControl::FeedControl(int fd) : fd_(fd) {
  if (fd_ >= 0) {
    struct stat st {};
    socket_ = fstat(fd_, &st) == 0 && S_ISSOCK(st.st_mode);
    // A socket is read with MSG_DONTWAIT: O_NONBLOCK would also make the feed writer's duplicate non-blocking.
    if (!socket_) fcntl(fd_, F_SETFL, fcntl(fd_, F_GETFL) | O_NONBLOCK);
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
    ssize_t n = socket_ ? recv(fd_, chunk, sizeof chunk, MSG_DONTWAIT) : read(fd_, chunk, sizeof chunk);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) break;
    if (n <= 0) {  // end of file (gearshift gone) or an error: nothing more will come
      close(fd_);
      fd_ = -1;
      break;
    }
    trace::for_each_line(buf_, std::string_view(chunk, static_cast<std::size_t>(n)), [&](std::string_view l) {
      if (auto c = feed::parse_control_line(l)) {
        if (c->windows) last.windows = ActivityWindows{c->windows->period_ns, c->windows->window_ns};
        if (c->marker_period_ns) last.marker_period_ns = c->marker_period_ns;
        last.off = last.off || c->off;
      } else {
        ++invalid_;
      }
    });
    if (buf_.size() > 4096) buf_.clear();  // an unfinished line that long is no valid command
  }
  return last;
}

}  // namespace gearshift::cupti
