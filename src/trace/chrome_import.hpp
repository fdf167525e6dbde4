// Import of torch.profiler / Kineto Chrome trace JSON (plain or gzip), streamed with a SAX parser: memory
// grows with the kept records (kernels, memcpys, memsets, step markers), never with the file size.
//
// Accepted shapes: {"traceEvents": [...], ...} (any torch version since 1.8, HTA, Kineto) and the 2020 bare
// array [...]. Categories are matched case-insensitively: kernel/Kernel, gpu_memcpy/Memcpy, gpu_memset/Memset;
// step markers are user_annotation / gpu_user_annotation events named "ProfilerStep#N" and NVTX ranges named
// "gearshift.step". Chrome trace `ts`/`dur` are µs (displayTimeUnit only changes the display); they are
// converted exactly to integer ns. Stream comes from args.stream, else tid (number or "stream 7").
#pragma once

#include <string>

#include "trace/record.hpp"

namespace gearshift::trace {

struct ChromeImportOptions {
  bool require_kernels = true;  // throw TraceError when the file holds no kernel event
};

// Throws TraceError (one line naming the file and the event index / byte offset) on: a file that cannot be
// opened, truncated or corrupt gzip, invalid JSON, a kept event without name/ts/dur, a negative duration, an
// absurd duration (> 1 h) or timestamp (beyond int64 ns), and (by default) no kernels.
Trace import_chrome_trace(const std::string& path, const ChromeImportOptions& options = {});

}  // namespace gearshift::trace
