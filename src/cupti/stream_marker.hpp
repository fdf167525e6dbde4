// Stream markers: GPU progress at a few µs of CPU per marker instead of CUPTI's per-kernel activity cost.
//
// Once every `period`, the launch callback of one kernel asks the GPU to write a sequence number into pinned
// host memory right after that kernel (cuStreamWriteValue64 on the launch's stream: stream-ordered, so it is
// written once the kernel, and everything before it on that stream, finished). The runtime feed's writer
// thread reads the word at each of its wake-ups (a plain memory read, no CUDA call) and, when the number has
// arrived, sends `M <correlation> <not_before_ns> <seen_ns>` (runtime/feed.hpp): the kernel ended between the
// previous read and this one. One marker is outstanding at a time; the next may be claimed `period` after the
// last was seen.
//
// This class is the state machine only (no CUDA: tested in CI); cupti/marker_issuer.hpp issues the writes.
// Thread-safety: claim/issued/abandon from any launch thread (at most one claim succeeds at a time), poll from
// the feed's writer thread, set_period from the controller thread.
#pragma once

#include <atomic>
#include <cstdint>
#include <optional>

namespace gearshift::cupti {

struct MarkerSeen {
  std::uint32_t correlation = 0;   // the launch the marker followed
  std::int64_t not_before_ns = 0;  // the marker was not written yet (previous read, or its issue), ns
  std::int64_t seen_ns = 0;        // the read that saw it, ns
};

struct MarkerStats {
  std::uint64_t issued = 0, seen = 0, abandoned = 0;
};

class StreamMarkers {
 public:
  // A marker not seen this long after its issue is given up (its stream was destroyed with it, or its
  // context): the next one may be claimed.
  static constexpr std::int64_t kGiveUpNs = 10'000'000'000;

  // The host word the GPU writes (pinned, mapped memory; set once it exists). Until then no poll sees anything.
  void set_word(const std::uint64_t* word) noexcept { word_.store(word, std::memory_order_release); }

  // 0 or less: off. Takes effect at the next claim; ignored once disabled.
  void set_period_ns(std::int64_t period_ns) noexcept {
    if (!disabled_.load(std::memory_order_relaxed)) period_ns_.store(period_ns, std::memory_order_relaxed);
  }
  // Off for good (the driver refused a marker: every later one would fail the same way).
  void disable() noexcept {
    disabled_.store(true, std::memory_order_relaxed);
    period_ns_.store(0, std::memory_order_relaxed);
  }
  std::int64_t period_ns() const noexcept { return period_ns_.load(std::memory_order_relaxed); }

  // Launch entry (hot path: two relaxed loads when nothing is due): true when the launch with `correlation`,
  // entered at `now_ns`, is to carry the marker; then exactly one of issued() or abandon() must follow.
  bool claim(std::int64_t now_ns, std::uint32_t correlation) noexcept {
    const std::int64_t p = period_ns_.load(std::memory_order_relaxed);
    if (p <= 0 || now_ns < next_ns_.load(std::memory_order_relaxed)) return false;
    int idle = kIdle;
    if (!state_.compare_exchange_strong(idle, kClaimed, std::memory_order_acquire, std::memory_order_relaxed))
      return false;
    // The first check may have read a next_ns_ older than the marker seen just before our claim; disable()
    // may have come in between too.
    if (now_ns < next_ns_.load(std::memory_order_relaxed) || disabled_.load(std::memory_order_relaxed)) {
      state_.store(kIdle, std::memory_order_release);
      return false;
    }
    claimed_correlation_.store(correlation, std::memory_order_relaxed);
    claimed_ns_ = now_ns;
    return true;
  }
  // True while the launch with `correlation` holds the claim (its exit may then issue or abandon): an exit
  // whose entry did not claim (callbacks turned on during the call, a stale per-call slot) finds false.
  bool claimed_by(std::uint32_t correlation) const noexcept {
    return state_.load(std::memory_order_acquire) == kClaimed &&
           claimed_correlation_.load(std::memory_order_relaxed) == correlation;
  }
  // The claimer: when it claimed (the marker cannot be written before), and the sequence number to write
  // (increasing from 1).
  std::int64_t claimed_ns() const noexcept { return claimed_ns_; }
  std::uint64_t next_sequence() noexcept { return seq_.load(std::memory_order_relaxed) + 1; }
  // The claimer wrote `sequence` after its kernel.
  void issued(std::uint64_t sequence) noexcept;
  // The claimer did not write (the stream is capturing, the launch or the write failed): the next launch
  // after one period may try again.
  void abandon(std::int64_t now_ns) noexcept;

  // The writer thread, at each wake-up (`now_ns`): reads the host word; the outstanding marker when it has
  // arrived.
  std::optional<MarkerSeen> poll(std::int64_t now_ns) noexcept;

  MarkerStats stats() const noexcept;

 private:
  static constexpr int kIdle = 0, kClaimed = 1, kOutstanding = 2;
  std::atomic<const std::uint64_t*> word_{nullptr};
  std::atomic<std::int64_t> period_ns_{0};
  std::atomic<bool> disabled_{false};
  std::atomic<std::int64_t> next_ns_{0};  // no claim before this time
  std::atomic<int> state_{kIdle};
  std::atomic<std::uint64_t> seq_{0};     // the last sequence number issued
  // The claim (the outstanding marker's once issued): written by the claimer, read by the poller after it saw
  // kOutstanding (acquire; issued() stores it with release).
  std::atomic<std::uint32_t> claimed_correlation_{0};
  std::int64_t claimed_ns_ = 0;
  // Poller only: the last poll that found the outstanding marker not yet written (INT64_MIN: none since it
  // was issued); the marker was written after it.
  std::int64_t last_miss_ns_ = INT64_MIN;
  std::atomic<std::uint64_t> issued_count_{0}, seen_count_{0}, abandoned_count_{0};
};

}  // namespace gearshift::cupti
