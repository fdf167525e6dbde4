// The runtime's way back into the job: `gearshift run` writes control commands (A: kernel activity windows,
// M: stream marker period, O: the feed off; feed/protocol.hpp) on the feed's own connection (so that `run --auto` collects every kernel until its plan exists, then only samples, and the runtime can
// ask for every kernel again when it gets no other sign of GPU progress). The injection library's controller
// thread polls it; nothing here blocks.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "cupti/controller.hpp"

namespace gearshift::cupti {

// What the runtime asked for; an empty field: nothing new of that kind.
struct ControlCommand {
  std::optional<ActivityWindows> windows;         // A
  std::optional<std::int64_t> marker_period_ns;   // M
  bool off = false;                               // O: turn the feed off for good
  bool empty() const { return !windows && !marker_period_ns && !off; }
};

class FeedControl {
 public:
  // `fd` is ours from here on (made non-blocking, closed by the destructor or at end of file): the feed's
  // connection, or a duplicate of it.
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
  bool socket_ = false;
  std::string buf_;
  int invalid_ = 0;
};

}  // namespace gearshift::cupti
