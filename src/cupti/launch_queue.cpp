#include "cupti/launch_queue.hpp"

#include <bit>

namespace gearshift::cupti {

LaunchQueue::LaunchQueue(std::size_t capacity)
    : mask_(std::bit_ceil(capacity < 2 ? std::size_t{2} : capacity) - 1), slots_(new Slot[mask_ + 1]) {
  for (std::size_t i = 0; i <= mask_; ++i) slots_[i].seq.store(i, std::memory_order_relaxed);
}

}  // namespace gearshift::cupti
