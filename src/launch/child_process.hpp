// Runs a command as a child process and forwards SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGUSR1 and SIGUSR2 to it, so
// that a wrapper (`gearshift monitor|run|trace -- CMD`) behaves like CMD for whoever signals it. One child at a
// time per process.
//
// The wait does not rely on a signal interrupting waitpid: the forwarded signals (and SIGCHLD) are blocked in
// the waiting thread and taken with sigtimedwait, alternating with waitpid(WNOHANG). Under ThreadSanitizer a
// handler runs only when its thread enters a call TSan knows; a thread parked in waitpid never did.
#pragma once

#include <signal.h>

#include <string>
#include <vector>

namespace gearshift::launch {

struct ChildExit {
  int code = 0;          // the child's exit status; 128+N when killed by signal N (shell convention)
  bool started = false;  // false: it could not be started (see error); code is then 127 or 126 like a shell
  std::string error;     // why it could not be started
};

// Starts argv[0] (searched in PATH) with the current environment and standard streams, waits for it, and
// returns its exit status. The forwarded signals reach the child; the calling thread's signal mask and the
// handlers are restored after. Signals that arrive after the child ended were meant for it and are dropped.
ChildExit run_child(const std::vector<std::string>& argv);

// Blocks the forwarded signals and SIGCHLD in the calling thread while it lives, and restores the mask after.
// A command that starts threads before run_child holds one across their start: the threads inherit the mask,
// so a signal waits for run_child's sigtimedwait instead of going to a thread that would only forward it late.
class ForwardedSignalsBlocked {
 public:
  ForwardedSignalsBlocked();
  ~ForwardedSignalsBlocked();
  ForwardedSignalsBlocked(const ForwardedSignalsBlocked&) = delete;
  ForwardedSignalsBlocked& operator=(const ForwardedSignalsBlocked&) = delete;

 private:
  sigset_t old_;
};

}  // namespace gearshift::launch
