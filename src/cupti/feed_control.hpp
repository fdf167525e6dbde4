// The runtime's way back into the job: `gearshift run` names the read end of a second pipe in
// GEARSHIFT_RUNTIME_CONTROL_FD and writes one command per line:
//   A <period_ms> <window_ms>   kernel activity: every kernel (period 0), none (window 0), or only kernels
//                               launched in the first window_ms of every period_ms
//   M <period_us>               stream markers (stream_marker.hpp): one every period_us at most; 0: none
// (so that `run --auto` collects every kernel until its plan exists, then only samples, and the runtime can
// ask for every kernel again when it gets no other sign of GPU progress). The injection library's controller
// thread polls it; nothing here blocks.
#pragma once

#include <optional>
#include <string>
#include <string_view>

#include "cupti/controller.hpp"

namespace gearshift::cupti {

// What the runtime asked for; an empty field: nothing new of that kind.
struct ControlCommand {
  std::optional<ActivityWindows> windows;  // A
  std::optional<int> marker_period_us;     // M
  bool empty() const { return !windows && !marker_period_us; }
};

// One command line (without '\n'); nullopt when it is not a valid command.
std::optional<ControlCommand> parse_control_line(std::string_view line);

class FeedControl {
 public:
  // `fd` is ours from here on (made non-blocking, closed by the destructor).
  explicit FeedControl(int fd);
  ~FeedControl();
  FeedControl(const FeedControl&) = delete;
  FeedControl& operator=(const FeedControl&) = delete;

  // Reads what has arrived; of each kind, the last valid command among the complete lines. Invalid lines
  // are counted and skipped; end of file or an error stops further reads.
  ControlCommand poll();
  int invalid_lines() const { return invalid_; }

 private:
  int fd_;
  std::string buf_;
  int invalid_ = 0;
};

}  // namespace gearshift::cupti
