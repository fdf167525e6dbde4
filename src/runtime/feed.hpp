// The launch feed: the text protocol a job's in-process hook (CUPTI injection, Python hook, test job) uses to
// hand launches and completed-kernel activity to `gearshift run` through the pipe named by the environment
// variable GEARSHIFT_RUNTIME_FD. One event per line, times CLOCK_MONOTONIC ns:
//   L <cpu_ns> <correlation> <kernel name to the end of the line>
//   C <correlation> <gpu_start_ns> <gpu_end_ns>
#pragma once

#include <string_view>

#include "runtime/live.hpp"

namespace gearshift::runtime {

// Feeds one line to the runtime; false when it is not a valid event (ignored).
bool feed_line(std::string_view line, LiveRuntime& rt);

}  // namespace gearshift::runtime
