// Kernel records: what every importer produces and everything downstream (template, model, runtime) reads.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace gearshift::trace {

enum class OpKind : std::uint8_t { kernel, memcpy, memset };

const char* to_string(OpKind k);

// One GPU operation (kernel, memcpy or memset) as it ran. Times in ns on the trace's clock.
struct OpRecord {
  OpKind kind = OpKind::kernel;
  std::uint32_t name_id = 0;       // index into Trace::names
  std::int64_t start_ns = 0;       // GPU start timestamp, ns
  std::int64_t duration_ns = 0;    // GPU duration, ns (>= 0)
  std::int32_t device = 0;         // CUDA device ordinal
  std::int32_t stream = 0;         // CUDA stream id
  std::int64_t correlation = -1;   // launch correlation id (CUPTI / Kineto), -1 when unknown
  std::int64_t launch_ns = -1;     // CPU time of the launch API call, ns (-1 when the trace lacks it)
  std::array<std::int32_t, 3> grid{0, 0, 0};   // grid dimensions (0 when unknown)
  std::array<std::int32_t, 3> block{0, 0, 0};  // block dimensions (0 when unknown)
  std::int32_t registers_per_thread = 0;
  std::int32_t shared_memory_bytes = 0;
  std::int64_t bytes = 0;          // memcpy / memset size, bytes
  std::int32_t sm_clock_mhz = 0;   // SM clock sampled while it ran, MHz (0 when not sampled)
  std::int32_t mem_clock_mhz = 0;  // memory clock sampled while it ran, MHz (0 when not sampled)
  // CUDA graph it ran in, 0 when launched on its own. The ops of one graph launch share `correlation` (the
  // graph launch call's); trace/graph_units.hpp groups them into one launch unit.
  std::uint32_t graph_id = 0;
  bool suspect = false;            // its timing is impossible (trace::sanitize_trace): its step is excluded

  std::int64_t end_ns() const { return start_ns + duration_ns; }
};

// A named range: ProfilerStep#i (CPU or GPU annotation) or an NVTX range.
struct Marker {
  std::string name;
  std::int64_t start_ns = 0;
  std::int64_t duration_ns = 0;
  bool on_gpu = false;  // gpu_user_annotation (GPU timeline) vs CPU-side annotation
};

// One reading of a device's clocks and power, taken beside the kernels (the CUPTI tracer samples NVML).
struct DeviceSample {
  std::int32_t device = 0;          // CUDA device ordinal
  std::int64_t time_ns = 0;         // when it was read, ns on the trace's clock
  std::int32_t sm_clock_mhz = 0;    // current SM clock, MHz (0 when not read)
  std::int32_t mem_clock_mhz = 0;   // current memory clock, MHz (0 when not read)
  std::int32_t power_mw = -1;       // board power, mW (NVML nvmlDeviceGetPowerUsage; -1 when not read)
};

// A synchronize the job called (the CPU waited for the GPU): cudaDeviceSynchronize / cuCtxSynchronize (scope
// device), cudaStreamSynchronize / cuStreamSynchronize (stream), cudaEventSynchronize / cuEventSynchronize (event:
// it waits only for the work before the event's record, so it says less about the GPU's progress). Times are CPU
// times on the trace's clock, the clock of OpRecord::launch_ns.
struct SyncRecord {
  enum class Scope : std::uint8_t { device, stream, event };
  Scope scope = Scope::device;
  std::int32_t device = -1;       // CUDA device ordinal, -1 when the producer does not say
  std::int32_t stream = -1;       // stream id (same numbering as OpRecord::stream), -1 when unknown or a device sync
  std::int64_t correlation = -1;  // correlation id of the synchronize call (same counter as the launches'), -1 unknown
  std::int64_t enter_ns = 0;      // CPU time the call was entered, ns
  std::int64_t duration_ns = 0;   // until it returned, ns (>= 0)
  std::int64_t exit_ns() const { return enter_ns + duration_ns; }
};

const char* to_string(SyncRecord::Scope s);  // "device", "stream", "event"

// Measured figures that a trace's producer recorded beside it (torch.profiler traces shipped with gearshift
// carry them in `meta`); absent when the trace does not say.
struct MeasuredStep {
  std::optional<double> step_time_s;      // measured s/step
  std::optional<double> energy_per_step_j;  // measured J/step (NVML total-energy counter)
  std::optional<double> average_power_w;  // measured W
};

// What the importer and trace::sanitize_trace found wrong with the records and did about it. Every count is
// also said in plain words in `warnings`, which `gearshift plan` prints and puts in its JSON.
struct TraceHealth {
  std::size_t zero_time_ops = 0;       // GPU ops with ts 0 and dur 0 (a Kineto export bug): dropped
  std::size_t zero_time_markers = 0;   // step markers with ts 0 and dur 0: dropped
  std::size_t duplicate_ops = 0;       // exact duplicates of another op (same name, times, device, stream): dropped
  std::size_t duplicate_markers = 0;   // exact duplicates of another step marker: dropped
  std::size_t overrunning_ops = 0;     // ops that end after their stream successor starts: marked suspect
  std::size_t repaired_markers = 0;    // step markers that overlapped the next one: cut at its start
  std::size_t collapsed_markers = 0;   // step markers of zero duration (ts > 0): dropped
  bool has_trailer = true;             // gearshift format: the trailer was there
  std::uint64_t dropped_records = 0;   // gearshift format: records the producer said it dropped
  std::vector<std::string> warnings;   // one line each, plain words, no trailing period
};

// What a profiler recorded on the CPU side besides the GPU's ops (torch.profiler's Chrome traces): each record
// cost the job CPU time while it was traced (issue 46; bench/device/profiler_cost.py measured a few µs per
// recorded CPU event on an H100, bench/results/2026-12-07-s33-device.md). Counts over the whole trace.
struct ProfilerRecords {
  std::int64_t cpu_ops = 0;           // CPU op and user annotation ranges ("cpu_op", "operator", "user_annotation")
  std::int64_t runtime_calls = 0;     // CUDA runtime and driver calls ("cuda_runtime", "runtime", "cuda_driver")
  std::int64_t python_functions = 0;  // Python frames ("python_function": `with_stack=True`)
  bool shapes = false;                // ops carry "Input Dims" (`record_shapes=True`)
  std::int64_t first_ns = 0, last_ns = 0;  // span of those records' starts, ns (0, 0: none)
};

struct Trace {
  std::string source;                  // file path or "embedded:<name>"
  std::string format;                  // "chrome-trace" or "gearshift-trace v1"
  std::vector<std::string> names;      // interned op names
  std::vector<OpRecord> ops;           // sorted by start_ns
  std::vector<Marker> markers;         // sorted by start_ns
  // The framework's optimizer-step annotations (torch's "Optimizer.step#<class>.step" CPU ranges), sorted by
  // start_ns: evidence that a period is the training step where the update's kernels are on no name list
  // (trace/step/evidence.cpp). Chrome traces only.
  std::vector<Marker> optimizer_ranges;
  std::vector<DeviceSample> samples;   // clock/power readings, sorted by time_ns (gearshift format only)
  std::vector<SyncRecord> syncs;       // the job's synchronizes, sorted by enter_ns
  // The producer recorded every synchronize of the job (so an empty `syncs` means it never synchronized). False
  // for gearshift traces before version 2 and Chrome traces without CUDA runtime events.
  bool syncs_recorded = false;
  MeasuredStep measured;
  std::string meta_json = "{}";        // the trace's metadata as JSON text (model, batch, ...)
  std::string gpu_name;                // device name when the trace says it, else empty
  bool complete = true;                // false when the producer said the trace was cut short
  TraceHealth health;                  // what import and sanitizing found and did
  ProfilerRecords profiler;            // a profiler's own CPU-side records (Chrome traces; zero otherwise)
  std::size_t kernel_count() const;
  const std::string& name_of(const OpRecord& r) const { return names[r.name_id]; }
};

}  // namespace gearshift::trace
