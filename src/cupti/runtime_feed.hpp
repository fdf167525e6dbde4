// The injection library's side of the runtime's launch feed (protocol: src/feed/protocol.hpp): on the
// connection to `gearshift run`'s socket (feed/socket.hpp; a pipe for gearshift_feed_attach), every kernel
// launch, completed kernel, synchronize and stream marker is written as one L, C, S or M line, times converted
// from the CUPTI clock to CLOCK_MONOTONIC.
// The launch callback only pushes a LaunchEvent into a lock-free queue (no syscall, no allocation); a writer
// thread of our own drains it every `period_ns`, demangles names (cached by CUPTI's symbol pointer) and
// writes whole batches. Completed kernels come from CUPTI's buffer thread and are queued under a mutex
// (not the launch path). Nothing here throws into CUDA: the writer catches everything, and a closed pipe
// (gearshift gone) turns the feed off quietly, with one note.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <string>
#include <string_view>
#include <thread>
#include <unordered_map>
#include <vector>

#include "cupti/launch_queue.hpp"
#include "cupti/stream_marker.hpp"

namespace gearshift::cupti {

// CLOCK_MONOTONIC minus `other_now_ns()`, ns: the read of `other` bracketed by two monotonic reads, the
// tightest of `tries` brackets kept (error ≤ half its width, well under a microsecond).
std::int64_t monotonic_offset_ns(const std::function<std::int64_t()>& other_now_ns, int tries = 5);

struct FeedStats {
  std::uint64_t launches = 0;         // L lines written
  std::uint64_t completions = 0;      // C lines written
  std::uint64_t syncs = 0;            // S lines written
  std::uint64_t markers = 0;          // M lines written
  std::uint64_t copies = 0;           // Y lines written (copies and memsets)
  std::uint64_t dropped_launches = 0;  // queue full (launches and synchronizes)
  bool broken = false;                // the pipe was closed or failed: the feed is off
};

class RuntimeFeed {
 public:
  // Starts the writer thread. `fd` stays ours (closed by stop()). `cupti_now_ns` reads the clock that the
  // launch and activity timestamps use; it is re-related to CLOCK_MONOTONIC every second.
  // The writer drains every `period_ns` (at least 50 µs).
  RuntimeFeed(int fd, std::function<std::int64_t()> cupti_now_ns, std::int64_t period_ns = 500'000,
              std::size_t queue_capacity = std::size_t{1} << 16);
  ~RuntimeFeed();
  RuntimeFeed(const RuntimeFeed&) = delete;
  RuntimeFeed& operator=(const RuntimeFeed&) = delete;

  // Hot path (launch callback): never blocks.
  void on_launch(const LaunchEvent& e) noexcept { queue_.push(e); }
  // Stream markers to poll at every wake-up (its M line after the launches drained then, so that a marker's
  // L line goes first); null:
  // none. Set before the launch callbacks are on; `markers` must outlive the feed.
  void set_markers(StreamMarkers* markers) noexcept { markers_.store(markers, std::memory_order_release); }
  // CUPTI's buffer thread: one completed kernel (CUPTI clock). `graph_kernel_name`: the (mangled) name of a
  // kernel that ran inside a CUDA graph, whose launch's L line does not name it; empty for any other kernel. Its
  // C line then carries the name's id, and the name goes out once in an N line (interned here by content: the
  // activity record's name need not outlive its buffer).
  void on_kernel_complete(std::uint32_t correlation, std::int64_t start_ns, std::int64_t end_ns, std::uint32_t stream,
                          std::uint32_t device, std::string_view graph_kernel_name = {}) noexcept;

  // CUPTI's buffer thread: one completed copy or memset (CUPTI clock), its correlation (the copy call's, or the
  // graph launch's) and size; `label` as the tracer names it (memcpy_label, memset_label).
  void on_copy_complete(std::uint32_t correlation, std::int64_t start_ns, std::int64_t end_ns, std::uint32_t stream,
                        std::uint32_t device, std::int64_t bytes, bool memset, std::string_view label) noexcept;

  // Writes what is queued, stops the thread, ends our side of a socket (shutdown: the reader sees the end even
  // while the control reader holds a duplicate) and closes the descriptor. Idempotent.
  void stop() noexcept;
  FeedStats stats() const;

 private:
  struct Completion {
    std::uint32_t correlation, stream, device;
    std::int64_t start_ns, end_ns;
    std::int64_t name_id;  // -1: its L line names it
  };
  struct CopyDone {
    std::uint32_t correlation, stream, device;
    std::int64_t start_ns, end_ns, bytes;
    bool memset;
    std::uint32_t label;  // index into labels_
  };
  struct NameHash {
    using is_transparent = void;
    std::size_t operator()(std::string_view s) const noexcept { return std::hash<std::string_view>{}(s); }
  };
  void loop() noexcept;
  void drain(std::string& batch);
  const std::string& name_of(const char* symbol);
  void write_all(const std::string& batch);

  int fd_;
  std::function<std::int64_t()> now_;
  std::int64_t period_ns_;
  LaunchQueue queue_;
  mutable std::mutex mu_;  // completions_, stop_, stats_
  std::condition_variable cv_;
  std::vector<Completion> completions_;
  std::vector<CopyDone> copies_;
  std::vector<std::string> labels_;  // copies' labels, interned (a handful of kinds); under mu_
  // Graph kernels' names by content -> id, and the (mangled) names not sent yet, in id order.
  std::unordered_map<std::string, std::int64_t, NameHash, std::equal_to<>> graph_names_;
  std::vector<std::pair<std::int64_t, std::string>> new_names_;
  bool stop_ = false;
  FeedStats stats_;
  std::int64_t offset_ns_ = 0;  // writer thread only
  std::atomic<StreamMarkers*> markers_{nullptr};
  std::unordered_map<const char*, std::string> names_;  // writer thread only
  std::thread thread_;
};

}  // namespace gearshift::cupti
