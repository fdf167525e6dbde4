#include "cli/child_process.hpp"

#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>

extern char** environ;

namespace gearshift::cli {

namespace {

constexpr int kForwarded[] = {SIGINT, SIGTERM, SIGHUP};
std::atomic<pid_t> g_child{0};
std::atomic<int> g_pending{0};  // a signal that came before the child existed
static_assert(std::atomic<pid_t>::is_always_lock_free && std::atomic<int>::is_always_lock_free,
              "used from a signal handler");

void forward(int sig, siginfo_t* info, void*) {
  // A terminal's Ctrl-C / hangup (SI_KERNEL) already reached the child through the process group: sending it
  // again would interrupt the child's own cleanup. Signals sent to us alone (kill, a scheduler) are forwarded.
  if (info && info->si_code == SI_KERNEL) return;
  pid_t c = g_child.load();
  if (c > 0) {
    kill(c, sig);
  } else {
    g_pending.store(sig);
  }
}

}  // namespace

ChildExit run_child(const std::vector<std::string>& argv) {
  ChildExit out;
  if (argv.empty()) {
    out.code = 127;
    out.error = "no command";
    return out;
  }
  struct sigaction sa {}, old[3];
  sa.sa_sigaction = forward;
  sa.sa_flags = SA_SIGINFO | SA_RESTART;
  sigemptyset(&sa.sa_mask);
  for (int i = 0; i < 3; ++i) sigaction(kForwarded[i], &sa, &old[i]);

  posix_spawnattr_t attr;
  posix_spawnattr_init(&attr);
  sigset_t none, defaults;
  sigemptyset(&none);
  sigemptyset(&defaults);
  for (int s : kForwarded) sigaddset(&defaults, s);
  posix_spawnattr_setsigmask(&attr, &none);
  posix_spawnattr_setsigdefault(&attr, &defaults);
  posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF);

  std::vector<char*> args;
  for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  pid_t pid = 0;
  int rc = posix_spawnp(&pid, args[0], nullptr, &attr, args.data(), environ);
  posix_spawnattr_destroy(&attr);
  if (rc != 0) {
    out.code = rc == ENOENT ? 127 : 126;
    out.error = std::strerror(rc);
  } else {
    out.started = true;
    g_child.store(pid);
    if (int sig = g_pending.exchange(0)) kill(pid, sig);
    int status = 0;
    while (waitpid(pid, &status, 0) < 0) {
      if (errno != EINTR) {
        status = 0;
        out.error = std::strerror(errno);
        break;
      }
    }
    g_child.store(0);
    if (WIFEXITED(status)) out.code = WEXITSTATUS(status);
    else if (WIFSIGNALED(status)) out.code = 128 + WTERMSIG(status);
  }
  for (int i = 0; i < 3; ++i) sigaction(kForwarded[i], &old[i], nullptr);
  g_pending.store(0);
  return out;
}

}  // namespace gearshift::cli
