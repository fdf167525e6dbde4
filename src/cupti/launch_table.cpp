#include "cupti/launch_table.hpp"

#include <bit>

namespace gearshift::cupti {

const char* to_string(LaunchApi api) {
  switch (api) {
    case LaunchApi::unknown: return "unknown";
    case LaunchApi::kernel: return "cuLaunchKernel";
    case LaunchApi::kernel_ex: return "cuLaunchKernelEx";
    case LaunchApi::cooperative_kernel: return "cuLaunchCooperativeKernel";
    case LaunchApi::graph: return "cuGraphLaunch";
  }
  return "unknown";
}

LaunchTable::LaunchTable(std::size_t slots)
    : mask_(std::bit_ceil(slots < 2 ? std::size_t{2} : slots) - 1),
      slots_(std::make_unique<std::atomic<std::uint64_t>[]>(mask_ + 1)),
      times_(std::make_unique<std::atomic<std::int64_t>[]>(mask_ + 1)),
      graphs_(std::make_unique<std::atomic<std::uint64_t>[]>(mask_ + 1)) {
  for (std::size_t i = 0; i <= mask_; ++i) {
    slots_[i].store(0, std::memory_order_relaxed);
    graphs_[i].store(0, std::memory_order_relaxed);
    times_[i].store(-1, std::memory_order_relaxed);
  }
}

std::uint64_t LaunchTable::total_launches() const noexcept {
  std::uint64_t n = 0;
  for (const auto& c : counters_) n += c.value.load(std::memory_order_relaxed);
  return n;
}

}  // namespace gearshift::cupti
