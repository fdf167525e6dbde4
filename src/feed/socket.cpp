#include "feed/socket.hpp"

#include <fcntl.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <stdexcept>

namespace gearshift::feed {

namespace {

std::int64_t now_ms() {
  timespec ts{};
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<std::int64_t>(ts.tv_sec) * 1000 + ts.tv_nsec / 1'000'000;
}

bool address_of(const std::string& path, sockaddr_un& a) {
  a = {};
  a.sun_family = AF_UNIX;
  if (path.empty() || path.size() >= sizeof a.sun_path) return false;
  std::memcpy(a.sun_path, path.c_str(), path.size() + 1);
  return true;
}

}  // namespace

int connect_socket(const std::string& path, int timeout_ms, std::string* error) {
  auto fail = [&](int fd, const std::string& why) {
    if (fd >= 0) close(fd);
    if (error != nullptr) *error = why;
    return -1;
  };
  sockaddr_un a{};
  if (!address_of(path, a)) return fail(-1, "socket path '" + path + "' is empty or too long");
  const int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  if (fd < 0) return fail(-1, std::string("socket(): ") + std::strerror(errno));
  const std::int64_t deadline = now_ms() + timeout_ms;
  for (;;) {
    if (connect(fd, reinterpret_cast<const sockaddr*>(&a), sizeof a) == 0) break;
    const int e = errno;
    if (e == EINTR) continue;
    if (e == EINPROGRESS) {  // not for Unix sockets on Linux, but allowed: wait until writable
      pollfd p{fd, POLLOUT, 0};
      const int left = static_cast<int>(deadline - now_ms());
      if (left <= 0 || poll(&p, 1, left) <= 0) return fail(fd, "no answer within " + std::to_string(timeout_ms) + " ms");
      int so = 0;
      socklen_t len = sizeof so;
      if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &so, &len) != 0 || so != 0)
        return fail(fd, std::string("connect: ") + std::strerror(so != 0 ? so : errno));
      break;
    }
    if (e == EAGAIN && now_ms() < deadline) {  // the listener's backlog is full: it is busy, not gone
      timespec ts{0, 2'000'000};
      nanosleep(&ts, nullptr);
      continue;
    }
    if (e == EAGAIN) return fail(fd, "the listener did not accept within " + std::to_string(timeout_ms) + " ms");
    if (e == ECONNREFUSED) return fail(fd, "nobody listens on " + path + " (a stale socket)");
    if (e == ENOENT) return fail(fd, path + " does not exist");
    return fail(fd, "connect " + path + ": " + std::strerror(e));
  }
  fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) & ~O_NONBLOCK);
  return fd;
}

bool write_all(int fd, const std::string& data) {
  std::size_t done = 0;
  while (done < data.size()) {
    ssize_t n = send(fd, data.data() + done, data.size() - done, MSG_NOSIGNAL);
    if (n < 0 && errno == ENOTSOCK) n = write(fd, data.data() + done, data.size() - done);  // a pipe
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    done += static_cast<std::size_t>(n);
  }
  return true;
}

Listener::Listener() {
  const char* tmp = std::getenv("TMPDIR");
  std::string base = tmp != nullptr && *tmp != '\0' ? tmp : "/tmp";
  std::string templ = base + "/gearshift-run-XXXXXX";
  auto try_make = [&](std::string t) {
    if (mkdtemp(t.data()) == nullptr) return false;
    dir_ = t;
    path_ = dir_ + "/feed.sock";
    return true;
  };
  sockaddr_un a{};
  // A long $TMPDIR may not fit a socket address (108 bytes): /tmp then.
  if (!try_make(templ) || !address_of(path_, a)) {
    if (!dir_.empty()) rmdir(dir_.c_str());
    dir_.clear();
    if (!try_make("/tmp/gearshift-run-XXXXXX") || !address_of(path_, a))
      throw std::runtime_error(std::string("cannot create a private directory for the launch feed's socket: ") +
                               std::strerror(errno));
  }
  fd_ = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  if (fd_ < 0 || bind(fd_, reinterpret_cast<const sockaddr*>(&a), sizeof a) != 0 || listen(fd_, 128) != 0) {
    const std::string why = std::strerror(errno);
    remove();
    throw std::runtime_error("cannot listen on the launch feed's socket " + path_ + ": " + why);
  }
}

Listener::~Listener() { remove(); }

int Listener::accept_one() const {
  for (;;) {
    const int c = accept4(fd_, nullptr, nullptr, SOCK_CLOEXEC | SOCK_NONBLOCK);
    if (c < 0 && errno == EINTR) continue;
    return c;
  }
}

void Listener::remove() {
  if (fd_ >= 0) close(fd_);
  fd_ = -1;
  if (!path_.empty()) unlink(path_.c_str());
  if (!dir_.empty()) rmdir(dir_.c_str());
  dir_.clear();
}

}  // namespace gearshift::feed
