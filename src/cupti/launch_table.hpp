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

  // Hot path. `correlation` is CUPTI's correlation id of the launch call.
  void record(std::uint32_t correlation, LaunchApi api) noexcept {
    slots_[correlation & mask_].store((std::uint64_t{correlation} << 8) | static_cast<std::uint8_t>(api),
                                      std::memory_order_relaxed);
    counters_[static_cast<std::size_t>(api)].value.fetch_add(1, std::memory_order_relaxed);
  }

  // The API that launched `correlation`, or unknown when it was never seen or its slot was reused.
  LaunchApi lookup(std::uint32_t correlation) const noexcept {
    std::uint64_t w = slots_[correlation & mask_].load(std::memory_order_relaxed);
    if ((w >> 8) != correlation || (w & 0xff) == 0) return LaunchApi::unknown;
    return static_cast<LaunchApi>(w & 0xff);
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
  Counter counters_[kLaunchApiCount];
};

}  // namespace gearshift::cupti
