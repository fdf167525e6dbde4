// Progress lines of the service's long jobs (run --auto's warm-up and plan, a live run's notes, calibrate's
// sweep): the service never prints; the face that runs the job gives a sink (the CLI prints each line to
// stderr). A line carries no trailing newline. Called from the job's threads (the planner's, the feed
// reader's): a sink must be safe to call from any thread.
#pragma once

#include <functional>
#include <string_view>

namespace gearshift::service {

using ProgressSink = std::function<void(std::string_view line)>;  // empty: no output

// Hands `line` to `sink` when there is one.
inline void say(const ProgressSink& sink, std::string_view line) {
  if (sink) sink(line);
}

}  // namespace gearshift::service
