#include "cupti/stream_marker.hpp"

#include <algorithm>

namespace gearshift::cupti {

void StreamMarkers::issued(std::uint64_t sequence) noexcept {
  seq_.store(sequence, std::memory_order_relaxed);
  issued_count_.fetch_add(1, std::memory_order_relaxed);
  state_.store(kOutstanding, std::memory_order_release);
}

void StreamMarkers::abandon(std::int64_t now_ns) noexcept {
  next_ns_.store(now_ns + period_ns_.load(std::memory_order_relaxed), std::memory_order_relaxed);
  abandoned_count_.fetch_add(1, std::memory_order_relaxed);
  state_.store(kIdle, std::memory_order_release);
}

std::optional<MarkerSeen> StreamMarkers::poll(std::int64_t now_ns) noexcept {
  const std::uint64_t* w = word_.load(std::memory_order_acquire);
  if (w == nullptr || state_.load(std::memory_order_acquire) != kOutstanding) {
    last_miss_ns_ = INT64_MIN;  // a poll before the issue says nothing about when the marker was written
    return std::nullopt;
  }
  // Written by the GPU, not by a thread of ours: an atomic read of the aligned word.
  if (__atomic_load_n(w, __ATOMIC_ACQUIRE) < seq_.load(std::memory_order_relaxed)) {
    last_miss_ns_ = now_ns;
    if (now_ns - claimed_ns_ > kGiveUpNs) {
      last_miss_ns_ = INT64_MIN;
      abandon(now_ns);
    }
    return std::nullopt;
  }
  MarkerSeen seen{claimed_correlation_.load(std::memory_order_relaxed), std::max(last_miss_ns_, claimed_ns_), now_ns};
  last_miss_ns_ = INT64_MIN;
  seen_count_.fetch_add(1, std::memory_order_relaxed);
  next_ns_.store(now_ns + period_ns_.load(std::memory_order_relaxed), std::memory_order_relaxed);
  state_.store(kIdle, std::memory_order_release);
  return seen;
}

MarkerStats StreamMarkers::stats() const noexcept {
  return {issued_count_.load(std::memory_order_relaxed), seen_count_.load(std::memory_order_relaxed),
          abandoned_count_.load(std::memory_order_relaxed)};
}

}  // namespace gearshift::cupti
