// Clock samples onto kernels: each op gets the SM and memory clocks of the sample nearest its midpoint, as the
// CUPTI tracer does while it records (cupti/clock_timeline.hpp); for a trace whose clocks were sampled apart
// from its ops (`run --auto`'s warm-up: gearshift's own process reads NVML while the job's feed sends the ops,
// both on CLOCK_MONOTONIC).
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "trace/record.hpp"

namespace gearshift::trace {

// Sets sm_clock_mhz and mem_clock_mhz of each op of `t` that has none (0) from the sample of `samples` (sorted by
// time_ns, one device) nearest its midpoint, when that sample lies within `max_distance_ns` of it and read an SM
// clock (> 0). The samples' times must be on the ops' clock. Returns how many ops were set.
std::size_t attach_clock_samples(Trace& t, const std::vector<DeviceSample>& samples, std::int64_t max_distance_ns);

}  // namespace gearshift::trace
