// gearshift's own trace format, version 2 (docs/trace-format.md; version 1 files are read too): gzip-compressed JSON Lines, one header
// object, then one JSON array per name, op or marker, then a trailer that says whether the trace is complete.
// Written by the CUPTI tracer and by `gearshift` itself (trace/gearshift_writer.hpp, the half the injected
// library carries); read back here with bounded memory (line by line).
#pragma once

#include <string>
#include <string_view>

#include "trace/gearshift_writer.hpp"
#include "trace/record.hpp"

namespace gearshift::trace {

// Records added since (p: power samples, g: graph ids, y: synchronizes) are additive within version 1: a reader
// that knows them reads every file, and a version 2 header stays refused (../shared/data/bad_inputs g02).
// What the writer writes: kGearshiftTraceVersion (trace/gearshift_writer.hpp).
inline constexpr int kOldestGearshiftTraceVersion = 1;  // the oldest the reader reads

// The largest share of records a producer may have dropped (trailer `dropped_records` over records written
// plus dropped) for the trace to be planned, with a warning; above it the reader refuses the trace
// (TraceError): a plan from a trace missing more than 1 % of its ops would be built on holes.
inline constexpr double kMaxDroppedRecordShare = 0.01;

// Reads a gearshift trace. Throws TraceError naming the file and line on bad input, on a trailer whose record
// count disagrees with the file, and when the producer dropped more than kMaxDroppedRecordShare of the
// records. A file without its trailer (the writer died) is returned with complete=false,
// health.has_trailer=false and a warning; a trailer saying `complete: false` or `dropped_records` > 0 gives
// complete=false, health.dropped_records and a warning naming the count and share.
Trace read_gearshift_trace(const std::string& path);

// What a file is, from its first bytes after decompression (up to 512), where it is not a trace gearshift reads
// and that can be told: a PyTorch execution trace (Chakra's JSON), a tar or zip archive, an SQLite database, gzip
// inside gzip, binary data, text that is not JSON (a CSV named as such). "" for anything that may be a trace
// (JSON, an empty head): the importers then judge it.
std::string what_file_is(std::string_view head);

// Reads any supported trace: gearshift format (sniffed from its first line) or Chrome trace JSON. Throws
// TraceError "not a trace: <what_file_is>" for a file that can be told apart.
Trace import_trace(const std::string& path);

}  // namespace gearshift::trace
