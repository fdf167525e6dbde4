// Import of torch.profiler / Kineto Chrome trace JSON (plain or gzip), streamed with a SAX parser: memory
// grows with the kept records (kernels, memcpys, memsets, step markers), never with the file size.
//
// Accepted shapes: {"traceEvents": [...], ...} (any torch version since 1.8, HTA, Kineto) and the 2020 bare
// array [...]. Categories are matched case-insensitively: kernel/Kernel, gpu_memcpy/Memcpy, gpu_memset/Memset;
// step markers are user_annotation / gpu_user_annotation events named "ProfilerStep#N" and NVTX ranges named
// "gearshift.step". Chrome trace `ts`/`dur` are µs (displayTimeUnit only changes the display); they are
// converted exactly to integer ns; a `ts`/`dur` written as a string that spells a JSON number
// ("5154861704176.982", Ascend/pytorch#133) is read exactly like that number, with a warning. Stream comes from
// args.stream, else tid (number or "stream 7"). Ill-formed UTF-8 in strings (kineto#80) is replaced by U+FFFD
// while streaming (Utf8RepairStreamBuf), with a warning in Trace::health. Events with ts 0 and dur 0 are kept
// (trace::sanitize_trace drops and counts them).
#pragma once

#include <string>

#include "trace/record.hpp"

namespace gearshift::trace {

struct ChromeImportOptions {
  bool require_kernels = true;  // throw TraceError when the file holds no kernel event
};

// Throws TraceError (one line naming the file and the event index / byte offset) on: a file that cannot be
// opened or is a directory, an empty file, truncated or corrupt gzip, invalid JSON (NaN and Infinity named as
// such), data after the end of the JSON document, a kept event without name/ts/dur or whose ts/dur is a string
// that is not a number, a negative duration, an absurd duration (> 1 h) or timestamp (beyond int64 ns), and
// (by default) no kernels. Byte positions are 1-based positions in the decompressed file.
Trace import_chrome_trace(const std::string& path, const ChromeImportOptions& options = {});

}  // namespace gearshift::trace
