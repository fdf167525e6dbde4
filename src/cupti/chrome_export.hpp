// Chrome trace JSON (the Trace Event Format that Perfetto and chrome://tracing open) from a gearshift trace.
// Kernels, memcpys and memsets are complete ("X") events with torch.profiler's categories (kernel,
// gpu_memcpy, gpu_memset) on pid = device, tid = stream, so gearshift's own Chrome importer reads them back;
// NVTX ranges are user_annotation events; clock/power samples are counter ("C") events.
// ts/dur are µs written as exact decimals of the ns values (no rounding through double).
#pragma once

#include <string>

#include "trace/record.hpp"

namespace gearshift::cupti {

// Writes `path` (gzip-compressed when it ends in .gz). Throws trace::TraceError when it cannot be written.
void write_chrome_trace(const trace::Trace& trace, const std::string& path);

}  // namespace gearshift::cupti
