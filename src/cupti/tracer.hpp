// The tracer's core, free of CUPTI: turns decoded activity records into gearshift trace records.
//
// - correlation: each GPU op's correlation id is looked up in the LaunchTable filled by the launch callbacks
//   (ops whose launch was never seen are counted); kernels run inside a CUDA graph are grouped by graph launch
//   into "cuda.graph_launch#G" GPU ranges (written with all_ranges);
// - names: kernel names are demangled (as torch.profiler shows them) and interned;
// - clocks: each op gets the SM/memory clock sampled nearest its midpoint;
// - NVTX: start/end records are paired into ranges; step ranges ("gearshift.step", "ProfilerStep#N") are
//   counted for --steps;
// - writing: ops and samples stream to the GearshiftTraceWriter as they come; ranges are kept (few) and
//   written sorted at finish(), which writes the trailer: complete only when nothing was dropped or cut;
// - synchronizes: the device/stream synchronizes the job called (launch callbacks' clock) are kept like the
//   ranges and written at finish() as "y" records.
// Thread-safe: CUPTI's buffer-completed thread, the controller thread and exit handlers all call in.
#pragma once

#include <atomic>
#include <cstdint>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "cupti/activity.hpp"
#include "cupti/clock_timeline.hpp"
#include "cupti/config.hpp"
#include "cupti/launch_table.hpp"
#include "trace/gearshift_writer.hpp"

namespace gearshift::cupti {

struct TracerStats {
  std::uint64_t kernels = 0;
  std::uint64_t memcpys = 0;
  std::uint64_t memsets = 0;
  std::uint64_t graph_kernels = 0;    // kernels that ran inside a CUDA graph
  std::uint64_t uncorrelated = 0;     // ops whose launch callback was not seen (or its slot was reused)
  std::uint64_t ranges = 0;           // NVTX ranges completed (all names)
  std::uint64_t step_ranges = 0;      // of which step markers
  std::uint64_t samples = 0;          // clock/power samples written
  std::uint64_t syncs = 0;            // synchronizes kept (written at finish)
  std::uint64_t after_stop = 0;       // records that arrived after the trace was finished (not written)
  std::uint64_t dropped_cupti = 0;    // records CUPTI dropped (cuptiActivityGetNumDroppedRecords)
  std::uint64_t dropped_buffers = 0;  // buffer requests refused at the cap
  std::uint64_t dropped_ranges = 0;   // NVTX ranges beyond the cap or never closed
};

class Tracer {
 public:
  // Opens the output now (header: source, gpu name, meta). `launches` may be null (no correlation).
  Tracer(const TracerConfig& config, const LaunchTable* launches, const std::string& source,
         const std::string& gpu_name, const std::string& meta_json);

  void add(const GpuActivity& a);
  void add(const MarkerActivity& m);
  void add(const trace::DeviceSample& s);
  // A synchronize that returned (from the API callback of the thread that called it: its own lock, not the
  // activity records'). Beyond a cap of 4 M the rest are dropped and the trace no longer says it has them all.
  void add(const trace::SyncRecord& y);
  // CUPTI enabled every synchronize callback: the trailer then says the trace holds every synchronize.
  void set_syncs_recorded(bool all) noexcept { syncs_all_.store(all, std::memory_order_relaxed); }
  // CUPTI's own drop count and our refused buffer requests; they make the trace incomplete.
  void add_dropped(std::uint64_t cupti_records, std::uint64_t refused_buffers);

  // Why the trace should stop now (step count reached, record cap, write error), or none.
  std::optional<std::string> stop_reason() const;
  bool finished() const { return finished_.load(std::memory_order_acquire); }

  // Writes the ranges and the trailer and closes the file; later calls do nothing. `complete` is and-ed with
  // "nothing dropped, no write error"; `note` says why the run was cut (joined with the tracer's own notes).
  void finish(bool complete, const std::string& note);

  bool ok() const;
  std::string error() const;  // the writer's error (cannot open, disk full), empty when none
  TracerStats stats() const;
  const TracerConfig& config() const { return config_; }
  ClockTimeline& timeline() { return timeline_; }

 private:
  const std::string& demangled(std::string_view mangled);

  TracerConfig config_;
  const LaunchTable* launches_;
  ClockTimeline timeline_;
  mutable std::mutex mu_;
  trace::GearshiftTraceWriter writer_;
  std::atomic<bool> finished_{false};
  TracerStats stats_;
  std::uint64_t records_ = 0;
  std::optional<std::string> stop_;
  std::unordered_map<std::string, std::string> names_;  // mangled -> demangled
  struct OpenRange {
    std::string name;
    std::int64_t start_ns;
  };
  std::unordered_map<std::uint32_t, OpenRange> open_ranges_;  // NVTX id -> start
  std::vector<trace::Marker> ranges_;
  std::mutex sync_mu_;  // syncs_, sync_dropped_
  std::vector<trace::SyncRecord> syncs_;
  bool sync_dropped_ = false;
  std::atomic<bool> syncs_all_{false};
  struct GraphSpan {
    std::int64_t start_ns, end_ns;
    std::uint32_t graph_id;
  };
  std::map<std::uint32_t, GraphSpan> graph_launches_;  // correlation id of cuGraphLaunch -> GPU span
};

// "Memcpy HtoD (Pageable -> Device)" / "Memset (Device)": torch.profiler's labels, built from CUPTI's enums.
std::string memcpy_label(int copy_kind, int src_kind, int dst_kind);
std::string memset_label(int memory_kind);
// The C++ demangled name, or the input when it is not a mangled name.
std::string demangle(std::string_view mangled);

}  // namespace gearshift::cupti
