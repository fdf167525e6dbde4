// gearshift's own trace format, version 2 (docs/trace-format.md; version 1 files are read too): gzip-compressed JSON Lines, one header
// object, then one JSON array per name, op or marker, then a trailer that says whether the trace is complete.
// Written by the CUPTI tracer and by `gearshift` itself; read back with bounded memory (line by line).
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "trace/record.hpp"

namespace gearshift::trace {

// Records added since (p: power samples, g: graph ids, y: synchronizes) are additive within version 1: a reader
// that knows them reads every file, and a version 2 header stays refused (../shared/data/bad_inputs g02).
inline constexpr int kGearshiftTraceVersion = 1;       // what the writer writes
inline constexpr int kOldestGearshiftTraceVersion = 1;  // the oldest the reader reads

// The largest share of records a producer may have dropped (trailer `dropped_records` over records written
// plus dropped) for the trace to be planned, with a warning; above it the reader refuses the trace
// (TraceError): a plan from a trace missing more than 1 % of its ops would be built on holes.
inline constexpr double kMaxDroppedRecordShare = 0.01;

// Streaming writer. Names are interned on the fly; records are written as they come.
// Errors (cannot open, disk full) are reported by ok()/error() rather than thrown, so that a tracer inside a
// user's process can warn once and carry on.
class GearshiftTraceWriter {
 public:
  // `meta_json` must be a JSON object text; `gpu_name` may be empty.
  GearshiftTraceWriter(const std::string& path, const std::string& source, const std::string& gpu_name,
                       const std::string& meta_json = "{}");
  ~GearshiftTraceWriter();
  GearshiftTraceWriter(const GearshiftTraceWriter&) = delete;
  GearshiftTraceWriter& operator=(const GearshiftTraceWriter&) = delete;

  void write(const OpRecord& op, const std::string& name);
  void write(const Marker& marker);
  void write(const DeviceSample& sample);  // a "p" record (added in v1 by the CUPTI tracer; readers keep it)
  void write(const SyncRecord& sync);      // a "y" record
  // Whether every synchronize of the job was written (the trailer's "synchronizes"; Trace::syncs_recorded).
  void set_syncs_recorded(bool recorded) { syncs_recorded_ = recorded; }
  // Writes the trailer and closes. `complete=false` with a note when records were dropped or the run was cut.
  void close(bool complete, std::uint64_t dropped_records = 0, const std::string& note = "");

  bool ok() const { return error_.empty(); }
  const std::string& error() const { return error_; }
  std::uint64_t records_written() const { return records_; }

 private:
  void put_line(const std::string& line);
  struct Impl;
  std::unique_ptr<Impl> impl_;
  std::string path_;
  std::string error_;
  std::uint64_t records_ = 0;
  bool closed_ = false;
  bool syncs_recorded_ = false;
};

// Writes a whole trace (names, ops, markers, samples, synchronizes) and closes it as complete. Throws TraceError on failure.
void write_gearshift_trace(const Trace& trace, const std::string& path);

// Reads a gearshift trace. Throws TraceError naming the file and line on bad input, on a trailer whose record
// count disagrees with the file, and when the producer dropped more than kMaxDroppedRecordShare of the
// records. A file without its trailer (the writer died) is returned with complete=false,
// health.has_trailer=false and a warning; a trailer saying `complete: false` or `dropped_records` > 0 gives
// complete=false, health.dropped_records and a warning naming the count and share.
Trace read_gearshift_trace(const std::string& path);

// Reads any supported trace: gearshift format (sniffed from its first line) or Chrome trace JSON.
Trace import_trace(const std::string& path);

}  // namespace gearshift::trace
