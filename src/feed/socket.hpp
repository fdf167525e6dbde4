// The launch feed's transport: a Unix-domain stream socket whose path `gearshift run` names in the job's
// environment (kEnvSocket). A path, unlike an inherited descriptor, reaches every process of the job however it
// was started (torchrun, srun and launcher scripts close inherited descriptors; multiprocessing spawns). Each
// CUDA process connects once at start, sends its hello line, then its feed lines; the control commands come back
// on the same connection (protocol.hpp).
#pragma once

#include <string>

namespace gearshift::feed {

// Set by `gearshift run`: the path of its listening socket.
inline constexpr const char* kEnvSocket = "GEARSHIFT_RUNTIME_SOCKET";

// Connects to the socket at `path` without waiting more than `timeout_ms` (a listener whose backlog is full is
// retried until then). Returns a blocking, close-on-exec descriptor, or -1 with the reason in `*error`: no such
// socket, nobody listening (a stale path), a path too long for a socket address, the time ran out.
int connect_socket(const std::string& path, int timeout_ms, std::string* error);

// Writes all of `data` (EINTR retried, never SIGPIPE); false when the other end is gone or the write failed.
bool write_all(int fd, const std::string& data);

// A listening socket in a private directory of its own (mkdtemp under $TMPDIR or /tmp, mode 0700, so only this
// user's processes can connect); the directory and the socket go with the object.
class Listener {
 public:
  // Throws std::runtime_error saying what failed.
  Listener();
  ~Listener();
  Listener(const Listener&) = delete;
  Listener& operator=(const Listener&) = delete;

  int fd() const { return fd_; }                   // non-blocking, close-on-exec
  const std::string& path() const { return path_; }  // the socket's path, for kEnvSocket
  // Accepts one waiting connection: a non-blocking, close-on-exec descriptor, or -1 when none is waiting.
  int accept_one() const;
  // Closes the socket and removes it and its directory now (idempotent; the destructor does it too).
  void remove();

 private:
  int fd_ = -1;
  std::string dir_, path_;
};

}  // namespace gearshift::feed
