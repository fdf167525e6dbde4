// Timelines for Perfetto and chrome://tracing: Trace Event JSON with counter tracks.
//
// Ops (kernels, memcpys, memsets) are complete ("X") events with torch.profiler's categories (kernel,
// gpu_memcpy, gpu_memset) on pid = device, tid = stream, so that gearshift's own Chrome importer
// (trace/chrome_import.hpp) reads them back; step and NVTX ranges are user_annotation events, the job's
// synchronizes cuda_runtime events (as torch.profiler writes them). Every counter track is its own series of
// counter ("C") events, one number per event under args.value, so that a viewer draws each as a line of its own
// (chrome://tracing stacks the args of one counter event). ts/dur are µs written as exact decimals of ns.
// process_name metadata ("M") events name the rows ("GPU 0", "GPU 0 planned clocks", ...).
//
// Written by the CLI (`gearshift trace --chrome`, `run --timeline`, `monitor --timeline`), never by the library
// injected into the job.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "trace/record.hpp"

namespace gearshift::report {

struct CounterPoint {
  std::int64_t time_ns = 0;  // on the timeline's clock, ns
  double value = 0;          // in the track's unit (finite)
};

// One counter track: a value that holds from each point to the next.
struct CounterTrack {
  std::string name;     // shown as the track's name, unit included: "SM clock (MHz)", "power (W)"
  std::int64_t pid = 0; // process row it sits on (a device ordinal or NVML index)
  std::string process;  // that row's name ("GPU 0"); empty: left unnamed
  std::vector<CounterPoint> points;  // sorted by time_ns
};

// The measured tracks of a trace's clock and power samples (Trace::samples): per device that has them
// "SM clock (MHz)", "memory clock (MHz)" and "power (W)" on pid = device. A field the sampler could not read
// (0 MHz, power -1 mW) leaves no point; a track without points is left out.
std::vector<CounterTrack> sample_tracks(const trace::Trace& t);

struct TimelineContent {
  // Ops, markers and synchronizes written as events; nullptr: counters only.
  const trace::Trace* trace = nullptr;
  // Added to every time of `trace` (to bring it onto the counters' clock), ns.
  std::int64_t trace_offset_ns = 0;
  std::vector<CounterTrack> counters;
  nlohmann::json other_data = nlohmann::json::object();  // the file's "otherData" (producer, provenance)
};

// Writes `path` (gzip-compressed when it ends in .gz). Throws trace::TraceError when it cannot be written, and
// std::invalid_argument for a counter value that is not a finite number (JSON has no NaN).
void write_trace_events(const TimelineContent& content, const std::string& path);

}  // namespace gearshift::report
