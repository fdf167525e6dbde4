// The runtime's way back into the job: `gearshift run` names the read end of a second pipe in
// GEARSHIFT_RUNTIME_CONTROL_FD and writes one command per line:
//   A <period_ms> <window_ms>   kernel activity: every kernel (period 0), none (window 0), or only kernels
//                               launched in the first window_ms of every period_ms
// (so that `run --auto` collects every kernel until its plan exists, then only samples, and the runtime can
// ask for every kernel again when the job never synchronizes). The injection library's controller thread
// polls it; nothing here blocks.
#pragma once

#include <optional>
#include <string>
#include <string_view>

#include "cupti/controller.hpp"

namespace gearshift::cupti {

// One command line (without '\n'); nullopt when it is not a valid command.
std::optional<ActivityWindows> parse_control_line(std::string_view line);

class FeedControl {
 public:
  // `fd` is ours from here on (made non-blocking, closed by the destructor).
  explicit FeedControl(int fd);
  ~FeedControl();
  FeedControl(const FeedControl&) = delete;
  FeedControl& operator=(const FeedControl&) = delete;

  // Reads what has arrived; the last valid command among the complete lines, if any. Invalid lines are
  // counted and skipped; end of file or an error stops further reads.
  std::optional<ActivityWindows> poll();
  int invalid_lines() const { return invalid_; }

 private:
  int fd_;
  std::string buf_;
  int invalid_ = 0;
};

}  // namespace gearshift::cupti
