// A bounded multi-producer, single-consumer queue of launch events: the hand-off from the launch callback
// (any application thread: PyTorch launches from its main and its autograd threads) to the runtime feed's
// writer thread. Push never blocks, allocates or calls the kernel: one CAS on the tail and two stores; when
// the queue is full the event is dropped and counted (the runtime's predictor tolerates missing launches).
// Design: the per-slot sequence numbers of D. Vyukov's bounded MPMC queue, with one consumer.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>

#include "cupti/launch_table.hpp"

namespace gearshift::cupti {

// A kernel launch, or (sync_exit_ns >= 0) a device/stream synchronization that returned: every kernel
// launched before it had finished by then (the runtime's cheap sign of GPU progress).
struct LaunchEvent {
  std::uint32_t correlation = 0;  // CUPTI correlation id of the launch (or synchronize) call
  LaunchApi api = LaunchApi::unknown;
  std::int64_t cpu_ns = -1;       // CUPTI timestamp at the launch call / on entering the synchronize, ns
  const char* symbol = nullptr;   // CUPTI's kernel symbol name (mangled; null for graph launches); owned by CUPTI
  std::int64_t sync_exit_ns = -1;  // synchronize: CUPTI timestamp when it returned, ns; -1: a launch
  std::uint32_t graph_id = 0;     // graph launches: the graph exec's CUPTI id (cuptiGetGraphExecId; 0: unknown)
};

class LaunchQueue {
 public:
  // `capacity` is rounded up to a power of two (at least 2).
  explicit LaunchQueue(std::size_t capacity = std::size_t{1} << 16);

  // Any thread. False when full (the event is dropped and counted).
  bool push(const LaunchEvent& e) noexcept {
    std::size_t pos = tail_.load(std::memory_order_relaxed);
    for (;;) {
      Slot& s = slots_[pos & mask_];
      const std::size_t seq = s.seq.load(std::memory_order_acquire);
      const auto diff = static_cast<std::ptrdiff_t>(seq) - static_cast<std::ptrdiff_t>(pos);
      if (diff == 0) {
        if (tail_.compare_exchange_weak(pos, pos + 1, std::memory_order_relaxed)) {
          s.event = e;
          s.seq.store(pos + 1, std::memory_order_release);
          return true;
        }
      } else if (diff < 0) {
        dropped_.fetch_add(1, std::memory_order_relaxed);
        return false;
      } else {
        pos = tail_.load(std::memory_order_relaxed);
      }
    }
  }

  // The single consumer only. False when empty (or the next slot is still being written).
  bool pop(LaunchEvent& out) noexcept {
    Slot& s = slots_[head_ & mask_];
    if (s.seq.load(std::memory_order_acquire) != head_ + 1) return false;
    out = s.event;
    s.seq.store(head_ + mask_ + 1, std::memory_order_release);
    ++head_;
    return true;
  }

  std::uint64_t dropped() const noexcept { return dropped_.load(std::memory_order_relaxed); }
  std::size_t capacity() const noexcept { return mask_ + 1; }

 private:
  struct Slot {
    std::atomic<std::size_t> seq{0};
    LaunchEvent event;
  };
  std::size_t mask_;
  std::unique_ptr<Slot[]> slots_;
  alignas(64) std::atomic<std::size_t> tail_{0};  // producers
  alignas(64) std::size_t head_ = 0;              // the consumer
  alignas(64) std::atomic<std::uint64_t> dropped_{0};
};

}  // namespace gearshift::cupti
