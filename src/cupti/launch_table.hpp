// The launch-callback hot path: records which driver API launched each correlation id, and counts launches.
//
// Called on the application's launching threads for every kernel launch, so it allocates nothing, takes no
// lock and makes no system call: one relaxed atomic store into a fixed slot array indexed by correlation id,
// and one relaxed atomic add on a per-API counter. The runtime reuses this table to follow launches online.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>

namespace gearshift::cupti {

enum class LaunchApi : std::uint8_t {
  unknown = 0,
  kernel = 1,              // cuLaunchKernel(_ptsz)
  kernel_ex = 2,           // cuLaunchKernelEx(_ptsz)
  cooperative_kernel = 3,  // cuLaunchCooperativeKernel(_ptsz)
  graph = 4,               // cuGraphLaunch(_ptsz)
};
inline constexpr std::size_t kLaunchApiCount = 5;
const char* to_string(LaunchApi api);

class LaunchTable {
 public:
  // `slots` is rounded up to a power of two. Correlation ids grow by one per API call, so a slot is reused
  // after `slots` further calls; activity records arrive well within that (CUPTI flushes every second).
  explicit LaunchTable(std::size_t slots = std::size_t{1} << 17);

  // Hot path. `correlation` is CUPTI's correlation id of the launch call; `launch_ns` the CPU time of the call
  // (CUPTI timestamp, ns; -1 unknown), which places the op in the CPU-side step range that launched it.
  void record(std::uint32_t correlation, LaunchApi api, std::int64_t launch_ns = -1) noexcept {
    const std::size_t i = correlation & mask_;
    times_[i].store(launch_ns, std::memory_order_relaxed);
    // release: a reader that sees this correlation in the slot also sees its time (a plain store on x86)
    slots_[i].store((std::uint64_t{correlation} << 8) | static_cast<std::uint8_t>(api), std::memory_order_release);
    counters_[static_cast<std::size_t>(api)].value.fetch_add(1, std::memory_order_relaxed);
  }

  // CPU time of the launch of `correlation`, ns; -1 when unknown or its slot was reused since.
  std::int64_t launch_time(std::uint32_t correlation) const noexcept {
    const std::size_t i = correlation & mask_;
    if ((slots_[i].load(std::memory_order_acquire) >> 8) != correlation) return -1;
    std::int64_t t = times_[i].load(std::memory_order_relaxed);
    // A launch that reused the slot meanwhile has changed the slot word too: re-check it.
    return (slots_[i].load(std::memory_order_acquire) >> 8) == correlation ? t : -1;
  }

  // The API that launched `correlation`, or unknown when it was never seen or its slot was reused.
  LaunchApi lookup(std::uint32_t correlation) const noexcept {
    std::uint64_t w = slots_[correlation & mask_].load(std::memory_order_relaxed);
    if ((w >> 8) != correlation || (w & 0xff) == 0) return LaunchApi::unknown;
    return static_cast<LaunchApi>(w & 0xff);
  }

  // The graph launched by `correlation` (cuGraphLaunch: its graph exec's CUPTI id), recorded after record();
  // 0 when none, unknown or the slot was reused.
  void record_graph(std::uint32_t correlation, std::uint32_t graph_id) noexcept {
    graphs_[correlation & mask_].store((std::uint64_t{correlation} << 32) | graph_id, std::memory_order_relaxed);
  }
  std::uint32_t graph_id(std::uint32_t correlation) const noexcept {
    const std::uint64_t w = graphs_[correlation & mask_].load(std::memory_order_relaxed);
    return (w >> 32) == correlation ? static_cast<std::uint32_t>(w) : 0;
  }

  std::uint64_t launches(LaunchApi api) const noexcept {
    return counters_[static_cast<std::size_t>(api)].value.load(std::memory_order_relaxed);
  }
  std::uint64_t total_launches() const noexcept;
  std::size_t slots() const { return mask_ + 1; }

 private:
  // Each counter on its own cache line: launching threads (PyTorch's main and autograd threads) don't share.
  struct alignas(64) Counter {
    std::atomic<std::uint64_t> value{0};
  };
  std::size_t mask_;
  std::unique_ptr<std::atomic<std::uint64_t>[]> slots_;
  std::unique_ptr<std::atomic<std::int64_t>[]> times_;
  std::unique_ptr<std::atomic<std::uint64_t>[]> graphs_;  // (correlation << 32) | graph id
  Counter counters_[kLaunchApiCount];
};

}  // namespace gearshift::cupti
