// The launch feed turned into kernel records, for planning from a job's first steps (`gearshift run --auto`):
// a launch gives the kernel's name and CPU launch time, its completion the GPU start, end, stream and device.
// A CUDA graph launch (its L line names it trace::graph_launch_name(id)) completes many kernels, all with its
// correlation: each is kept with its graph id, named by its C line's name id (an N line; feed/protocol.hpp), or
// after the launch when the writer sent none. A graph launch stays pending until kMaxPendingGraphLaunches later graph launches were seen
// (its kernels complete long before; the bound keeps memory flat); any other launch until its one completion.
// Copies and memsets (Y lines) are kept as the trace's memcpy and memset ops, with no launch time (as the CUPTI
// tracer records them): the template needs them, or its calibration reads their time as idle. One that carries a
// pending graph launch's correlation ran inside that graph: its graph id and launch time are the launch's.
// Not thread-safe: the caller serialises add() and to_trace().
#pragma once

#include <cstdint>
#include <deque>
#include <string>
#include <unordered_map>
#include <vector>

#include "feed/protocol.hpp"
#include "runtime/string_map.hpp"
#include "trace/record.hpp"

namespace gearshift::runtime {

class FeedCollector {
 public:
  // Ops (kernels, copies, memsets) completed beyond `max_ops` are counted but not kept (a bound on memory).
  explicit FeedCollector(std::size_t max_ops) : max_ops_(max_ops) {}

  void add(const feed::FeedEvent& e);

  std::size_t ops() const { return ops_.size(); }            // completed ops kept: kernels, copies, memsets
  std::size_t kernels() const { return ops_.size() - copies_; }  // completed kernels kept
  std::size_t copies() const { return copies_; }             // copies and memsets kept
  std::uint64_t launches() const { return launches_; }       // launch events seen
  std::uint64_t unmatched() const { return unmatched_; }     // completions whose launch was not seen
  // Return times of the job's synchronizes (CLOCK_MONOTONIC ns, arrival order; at most max_ops kept): the
  // live step check (runtime/step_check.hpp) reads where they fall in the steps.
  std::vector<std::int64_t> sync_exits() const;
  bool full() const { return ops_.size() >= max_ops_; }

  // The kept ops as a trace, sorted by GPU start (what trace::detect_iterations and planning read), with the
  // job's synchronizes (device scope: an S line does not say which stream; syncs_recorded when the feed sent any,
  // so that the template places them, trace/cpu_timeline.hpp):
  // snapshot() then sort_by_start(). A caller that serialises add() under a lock takes only the snapshot under
  // it and sorts outside, so the feed is not held up by the sort.
  trace::Trace to_trace() const;
  trace::Trace snapshot() const;              // the kept ops in arrival order
  static void sort_by_start(trace::Trace& t);  // completions arrive in activity-buffer order

 private:
  static constexpr std::size_t kMaxPendingGraphLaunches = 1024;
  struct Launch {
    std::uint32_t name_id;
    std::int64_t cpu_ns;
    std::uint32_t graph_id;  // 0: a kernel launch
    bool graph;
  };
  std::size_t max_ops_;
  std::uint32_t intern(std::string_view name);
  StringMap<std::uint32_t> ids_;
  std::vector<std::string> names_;
  std::unordered_map<std::int64_t, Launch> pending_;  // correlation -> launch not completed yet
  std::unordered_map<std::int64_t, std::uint32_t> named_;  // N line's name id -> index in names_
  std::deque<std::int64_t> graph_launches_;           // pending graph launches, oldest first
  std::vector<trace::OpRecord> ops_;
  std::vector<trace::SyncRecord> syncs_;  // in arrival order: the process's call order
  std::uint64_t launches_ = 0, unmatched_ = 0;
  std::size_t copies_ = 0;
};

}  // namespace gearshift::runtime
