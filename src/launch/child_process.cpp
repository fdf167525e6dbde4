#include "launch/child_process.hpp"

#include <pthread.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>
#include <iterator>

extern char** environ;

namespace gearshift::launch {

namespace {

// What a batch system or a user sends to end or poke a job: all reach the child, as if it ran unwrapped.
constexpr int kForwarded[] = {SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGUSR1, SIGUSR2};
constexpr std::size_t kForwardedCount = std::size(kForwarded);
std::atomic<pid_t> g_child{0};
std::atomic<int> g_pending{0};  // a signal that came before the child existed
static_assert(std::atomic<pid_t>::is_always_lock_free && std::atomic<int>::is_always_lock_free,
              "used from a signal handler");

// A terminal's Ctrl-C / hangup (SI_KERNEL) already reached the child through the process group: sending it
// again would interrupt the child's own cleanup. Signals sent to us alone (kill, a scheduler) are forwarded.
void forward(int sig, const siginfo_t* info) {
  if (info && info->si_code == SI_KERNEL) return;
  pid_t c = g_child.load();
  if (c > 0) {
    kill(c, sig);
  } else {
    g_pending.store(sig);
  }
}

// For a thread that does not block the signals (one started before ForwardedSignalsBlocked, or none used).
void on_signal(int sig, siginfo_t* info, void*) { forward(sig, info); }

sigset_t waited_set() {
  sigset_t s;
  sigemptyset(&s);
  for (int sig : kForwarded) sigaddset(&s, sig);
  sigaddset(&s, SIGCHLD);  // wakes the wait when the child ends
  return s;
}

// Waits for `pid`, forwarding the signals taken meanwhile. Returns waitpid's status; -1 with errno on failure.
int wait_forwarding(pid_t pid, int& status) {
  const sigset_t set = waited_set();
  // The timeout bounds the wait when SIGCHLD went to another thread (which discards it): 50 ms late at worst.
  const timespec timeout{0, 50'000'000};
  for (;;) {
    pid_t r = waitpid(pid, &status, WNOHANG);
    if (r == pid) return 0;
    if (r < 0 && errno != EINTR) return -1;
    siginfo_t info{};
    int sig = sigtimedwait(&set, &info, &timeout);
    if (sig > 0 && sig != SIGCHLD) forward(sig, &info);
  }
}

// Takes any forwarded signal still pending for this thread: it was meant for the child, which has ended.
void drop_pending() {
  const sigset_t set = waited_set();
  const timespec zero{0, 0};
  siginfo_t info{};
  while (sigtimedwait(&set, &info, &zero) > 0) {
  }
}

}  // namespace

ForwardedSignalsBlocked::ForwardedSignalsBlocked() {
  const sigset_t set = waited_set();
  pthread_sigmask(SIG_BLOCK, &set, &old_);
}

ForwardedSignalsBlocked::~ForwardedSignalsBlocked() { pthread_sigmask(SIG_SETMASK, &old_, nullptr); }

ChildExit run_child(const std::vector<std::string>& argv) {
  ChildExit out;
  if (argv.empty()) {
    out.code = 127;
    out.error = "no command";
    return out;
  }
  struct sigaction sa {}, old[kForwardedCount];
  sa.sa_sigaction = on_signal;
  sa.sa_flags = SA_SIGINFO | SA_RESTART;
  sigemptyset(&sa.sa_mask);
  for (std::size_t i = 0; i < kForwardedCount; ++i) sigaction(kForwarded[i], &sa, &old[i]);
  const sigset_t set = waited_set();
  sigset_t old_mask;
  pthread_sigmask(SIG_BLOCK, &set, &old_mask);

  posix_spawnattr_t attr;
  posix_spawnattr_init(&attr);
  sigset_t none, defaults;
  sigemptyset(&none);
  sigemptyset(&defaults);
  for (int s : kForwarded) sigaddset(&defaults, s);
  posix_spawnattr_setsigmask(&attr, &none);  // the child starts with nothing blocked, whatever we block
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
    if (wait_forwarding(pid, status) < 0) {
      status = 0;
      out.error = std::strerror(errno);
    }
    g_child.store(0);
    if (WIFEXITED(status)) out.code = WEXITSTATUS(status);
    else if (WIFSIGNALED(status)) out.code = 128 + WTERMSIG(status);
  }
  drop_pending();
  pthread_sigmask(SIG_SETMASK, &old_mask, nullptr);
  for (std::size_t i = 0; i < kForwardedCount; ++i) sigaction(kForwarded[i], &old[i], nullptr);
  g_pending.store(0);
  return out;
}

}  // namespace gearshift::launch
