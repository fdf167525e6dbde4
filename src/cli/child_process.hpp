// Runs a command as a child process and forwards SIGINT, SIGTERM and SIGHUP to it, so that a wrapper such as
// `gearshift monitor -- CMD` behaves like CMD for whoever signals it. One child at a time per process.
#pragma once

#include <string>
#include <vector>

namespace gearshift::cli {

struct ChildExit {
  int code = 0;          // the child's exit status; 128+N when killed by signal N (shell convention)
  bool started = false;  // false: it could not be started (see error); code is then 127 or 126 like a shell
  std::string error;     // why it could not be started
};

// Starts argv[0] (searched in PATH) with the current environment and standard streams, waits for it, and
// returns its exit status. Signal handlers are installed for the duration and restored after.
ChildExit run_child(const std::vector<std::string>& argv);

}  // namespace gearshift::cli
