// Safety for clock writers: one owner per GPU (a lock file per GPU UUID, held with flock) and a watchdog
// process that resets the GPU's clocks when its owner dies without saying it restored them (kill -9).
//
// The lock's open file is shared with the watchdog, so after a crash the GPU stays locked until the watchdog
// has reset it. Lock files live in $GEARSHIFT_LOCK_DIR, else /tmp/gearshift-locks.
#pragma once

#include <stdexcept>
#include <string>
#include <sys/types.h>

namespace gearshift::runtime {

// Another process holds the GPU; what() names the GPU, the holder's pid and the lock file.
class GpuBusyError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

std::string lock_dir();

// May this process lock clocks? Root or CAP_SYS_ADMIN is needed for locked clocks whatever NVML's API
// restriction says; `reason` says why not. Reads only: never calls a Set function.
bool may_set_clocks(bool privileged, bool api_restricted, std::string* reason);
bool process_is_privileged();  // euid 0 or CAP_SYS_ADMIN in the effective set (/proc/self/status)

class GpuLock {
 public:
  // Throws GpuBusyError when held elsewhere, std::runtime_error when the lock file cannot be created.
  explicit GpuLock(const std::string& uuid);
  ~GpuLock();
  GpuLock(const GpuLock&) = delete;
  GpuLock& operator=(const GpuLock&) = delete;
  int fd() const { return fd_; }
  const std::string& path() const { return path_; }

 private:
  int fd_ = -1;
  std::string path_;
};

// A watchdog child process (`gearshift _watchdog`, execed from `exe`), sharing the lock. It opens NVML and
// waits on a pipe; when the pipe closes without the "restored" byte, it resets the GPU's locked SM (and, when
// `memory`, memory) clocks and exits.
class Watchdog {
 public:
  // Throws std::runtime_error when it cannot start.
  Watchdog(const std::string& exe, const std::string& uuid, const GpuLock& lock, bool memory);
  ~Watchdog();  // says "restored" and reaps it
  Watchdog(const Watchdog&) = delete;
  Watchdog& operator=(const Watchdog&) = delete;
  void release();
  pid_t pid() const { return pid_; }

 private:
  pid_t pid_ = -1;
  int pipe_w_ = -1;
};

// The watchdog's body: returns the process exit code. `lock_fd` keeps the GPU's lock until it returns.
int watchdog_main(const std::string& uuid, int pipe_fd, bool memory);

}  // namespace gearshift::runtime
