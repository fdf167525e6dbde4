// `gearshift run --timeline FILE`: the job's intended clock changes (what the dry-run log records, with --apply
// too) as counter tracks of a Perfetto / chrome://tracing timeline (report/trace_events.hpp), with the traced
// kernels when --trace-output kept them.
//
// Clocks: the changes are on the runtime's clock (CLOCK_MONOTONIC); a trace file is on CUPTI's. The kernels are
// moved onto the runtime's clock by one kernel both saw: the first completed kernel the launch feed reported
// (its GPU start on CLOCK_MONOTONIC) found in the trace by its correlation id and duration. Without such a kernel
// the kernels are left out, with a note: a timeline whose tracks do not line up would mislead.
#pragma once

#include <cstdint>
#include <mutex>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "runtime/actuator.hpp"

namespace gearshift::report {

// One kernel seen both by the launch feed and, maybe, the trace file: it ties the two clocks together.
struct ClockAnchor {
  std::int64_t pid = 0;             // the process that ran it
  std::int64_t correlation = 0;     // its CUPTI correlation id (the process's own, not namespaced)
  std::int64_t start_ns = 0;        // GPU start, CLOCK_MONOTONIC ns
  std::int64_t duration_ns = 0;     // ns
};

// Writes FILE; returns notes for the user (what was left out and why). `trace_path` empty: no kernels. Throws
// trace::TraceError when FILE cannot be written.
// `verify_arms`: measured verification's blocks (service/verify_run.hpp), each (CLOCK_MONOTONIC ns when its clocks
// were requested, the plan's rung alpha: 1 the plan, 0 the baseline clocks), drawn as a counter track; empty: none.
std::vector<std::string> write_run_timeline(const std::string& path, const std::vector<runtime::ClockChange>& changes,
                                            unsigned gpu, const std::string& trace_path,
                                            const std::optional<ClockAnchor>& anchor,
                                            const std::vector<std::pair<std::int64_t, double>>& verify_arms = {});

}  // namespace gearshift::report
