// The writer of gearshift's own trace format (docs/trace-format.md): the half of trace/gearshift_format.hpp
// that runs inside the user's job (the CUPTI tracer in libgearshift_inject.so), so that the injected library
// compiles no reader and no importer.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "trace/record.hpp"

namespace gearshift::trace {

inline constexpr int kGearshiftTraceVersion = 1;  // what the writer writes (trace/gearshift_format.hpp: reads)

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

}  // namespace gearshift::trace
