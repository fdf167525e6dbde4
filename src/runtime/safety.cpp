#include "runtime/safety.hpp"

#include <fcntl.h>
#include <signal.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <string>
#include <vector>

#include "gpu/nvml.hpp"

namespace gearshift::runtime {

std::string lock_dir() {
  const char* d = std::getenv("GEARSHIFT_LOCK_DIR");
  return d && *d ? d : "/tmp/gearshift-locks";
}

GpuLock::GpuLock(const std::string& uuid) {
  const std::string dir = lock_dir();
  if (mkdir(dir.c_str(), 01777) != 0 && errno != EEXIST)
    throw std::runtime_error(dir + ": cannot create the lock directory: " + std::strerror(errno));
  path_ = dir + "/" + uuid + ".lock";
  fd_ = open(path_.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  if (fd_ < 0) throw std::runtime_error(path_ + ": cannot open the GPU lock: " + std::strerror(errno));
  if (flock(fd_, LOCK_EX | LOCK_NB) != 0) {
    const int err = errno;
    char buf[32] = {0};
    ssize_t got = pread(fd_, buf, sizeof buf - 1, 0);
    std::string holder = got > 0 ? std::string(buf, static_cast<std::size_t>(got)) : std::string("?");
    while (!holder.empty() && (holder.back() == '\n' || holder.back() == ' ')) holder.pop_back();
    close(fd_);
    fd_ = -1;
    if (err == EWOULDBLOCK)
      throw GpuBusyError("GPU " + uuid + " is already controlled by another gearshift (pid " + holder +
                         ", lock " + path_ + "); only one clock writer per GPU: wait for it to finish or stop it");
    throw std::runtime_error(path_ + ": cannot lock: " + std::strerror(err));
  }
  std::string pid = std::to_string(getpid()) + "\n";
  if (ftruncate(fd_, 0) != 0 || pwrite(fd_, pid.data(), pid.size(), 0) < 0) {
    // The pid is for the message only; the lock itself holds.
  }
}

GpuLock::~GpuLock() {
  if (fd_ >= 0) close(fd_);  // releases our reference; the watchdog may still hold the lock
}

Watchdog::Watchdog(const std::string& exe, const std::string& uuid, const GpuLock& lock, bool memory) {
  int p[2];
  if (pipe2(p, O_CLOEXEC) != 0) throw std::runtime_error(std::string("watchdog pipe: ") + std::strerror(errno));
  // Everything the child needs is built before fork: after it only async-signal-safe calls.
  const std::string fd_arg = std::to_string(3);
  std::vector<std::string> args{exe, "_watchdog", "--uuid", uuid, "--fd", fd_arg};
  if (memory) args.push_back("--memory");
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  const int lock_fd = lock.fd();
  pid_t pid = fork();
  if (pid < 0) {
    close(p[0]);
    close(p[1]);
    throw std::runtime_error(std::string("watchdog fork: ") + std::strerror(errno));
  }
  if (pid == 0) {
    setsid();  // out of the terminal's process group: Ctrl-C must not kill it with its owner
    // fd 3: the pipe's read end, fd 4: the lock (dup2 clears close-on-exec).
    int r = fcntl(p[0], F_DUPFD_CLOEXEC, 10), l = fcntl(lock_fd, F_DUPFD_CLOEXEC, 10);
    if (r < 0 || l < 0 || dup2(r, 3) < 0 || dup2(l, 4) < 0) _exit(126);
    execv(argv[0], argv.data());
    _exit(127);
  }
  close(p[0]);
  pid_ = pid;
  pipe_w_ = p[1];
}

void Watchdog::release() {
  if (pipe_w_ >= 0) {
    const char ok = 'R';
    if (write(pipe_w_, &ok, 1) != 1) {
      // Then the watchdog sees EOF alone and resets once more: harmless.
    }
    close(pipe_w_);
    pipe_w_ = -1;
  }
  if (pid_ > 0) {
    int st = 0;
    while (waitpid(pid_, &st, 0) < 0 && errno == EINTR) {
    }
    pid_ = -1;
  }
}

Watchdog::~Watchdog() { release(); }

int watchdog_main(const std::string& uuid, int pipe_fd, bool memory) {
  signal(SIGINT, SIG_IGN);
  signal(SIGHUP, SIG_IGN);
  signal(SIGPIPE, SIG_IGN);
  // Open NVML now, while the owner lives, so that the reset after its death takes no library start-up.
  auto nvml = gpu::Nvml::open();
  std::vector<gpu::Device> devs;
  if (nvml) {
    auto all = nvml.value()->devices();
    if (all)
      for (auto& d : all.value()) {
        auto info = d.info();
        if (info && info.value().uuid == uuid) devs.push_back(d);
      }
  }
  char c = 0;
  ssize_t got = 0;
  bool restored = false;
  for (;;) {
    got = read(pipe_fd, &c, 1);
    if (got < 0 && errno == EINTR) continue;
    if (got == 1 && c == 'R') restored = true;
    if (got <= 0) break;
  }
  if (restored) return 0;
  if (devs.empty()) {
    std::fprintf(stderr, "gearshift watchdog: owner died but GPU %s cannot be opened to reset its clocks\n", uuid.c_str());
    return 1;
  }
  int rc = 0;
  auto sm = devs[0].reset_locked_sm_clocks();
  if (!sm) rc = 1;
  if (memory) {
    auto mem = devs[0].reset_locked_mem_clocks();
    if (!mem && mem.error().code != gpu::NvmlErrc::kNotSupported) rc = 1;
  }
  std::fprintf(stderr, "gearshift watchdog: owner died; clocks of GPU %s %s\n", uuid.c_str(),
               rc == 0 ? "reset to default" : "could NOT be reset");
  return rc;
}

bool process_is_privileged() {
  if (geteuid() == 0) return true;
  std::ifstream in("/proc/self/status");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("CapEff:", 0) == 0) {
      unsigned long long caps = std::strtoull(line.c_str() + 7, nullptr, 16);
      constexpr int kCapSysAdmin = 21;  // linux/capability.h
      return (caps >> kCapSysAdmin) & 1ULL;
    }
  }
  return false;
}

bool may_set_clocks(bool privileged, bool api_restricted, std::string* reason) {
  if (privileged) return true;
  if (reason) {
    *reason = api_restricted ? "not root, no CAP_SYS_ADMIN, and NVML restricts clock changes to root"
                             : "not root and no CAP_SYS_ADMIN (locked clocks need either)";
  }
  return false;
}

}  // namespace gearshift::runtime
