// The launch feed: the text protocol a job's in-process hook (CUPTI injection, Python hook, test job) uses to
// hand launches and completed-kernel activity to `gearshift run` through the pipe named by the environment
// variable GEARSHIFT_RUNTIME_FD. One event per line, fields separated by one or more spaces, times
// CLOCK_MONOTONIC ns:
//   L <cpu_ns> <correlation> <kernel name to the end of the line>
//   C <correlation> <gpu_start_ns> <gpu_end_ns> [<stream> [<device>]]
//   S <correlation> <enter_ns> <exit_ns>
//   M <correlation> <not_before_ns> <seen_ns>
// C's optional trailing fields are the kernel's CUDA stream id and device ordinal (absent: stream 0, device 0;
// a line without them, the protocol's first form, stays valid). Nothing may follow them. S is a device or stream
// synchronize the job called (entered, returned): every kernel launched before it had finished by exit_ns. M is a
// stream marker (cupti/stream_marker.hpp) written by the GPU after the kernel launched with that correlation:
// not written yet at not_before_ns, written by seen_ns (the two polls around it), so the kernel ended between.
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>

#include "runtime/live.hpp"

namespace gearshift::runtime {

struct FeedEvent {
  enum class Kind { launch, complete, sync, marker };
  Kind kind = Kind::launch;
  std::int64_t correlation = 0;
  std::int64_t cpu_ns = 0;        // launch: CPU time of the launch call
  std::int64_t gpu_start_ns = 0;  // complete; sync: entered; marker: not yet written
  std::int64_t gpu_end_ns = 0;    // complete; sync: returned; marker: written
  std::int32_t stream = 0;        // complete: CUDA stream id (0 when the line omits it)
  std::int32_t device = 0;        // complete: CUDA device ordinal (0 when the line omits it)
  std::string_view name;          // launch: the kernel name, a view into the parsed line
};

// One line (without its '\n'); nullopt when it is not a valid event: unknown kind, a missing or non-numeric
// field, a negative or out-of-range stream/device, text after the last field of a C, S or M line, or an S or
// M line whose second time is before its first.
std::optional<FeedEvent> parse_feed_line(std::string_view line);

// Hands a parsed event to the runtime.
void feed_event(const FeedEvent& e, LiveRuntime& rt);

// Parses and feeds one line to the runtime; false when it is not a valid event (ignored).
bool feed_line(std::string_view line, LiveRuntime& rt);

}  // namespace gearshift::runtime
