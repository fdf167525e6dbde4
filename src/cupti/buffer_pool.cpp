#include "cupti/buffer_pool.hpp"

#include <algorithm>
#include <new>

namespace gearshift::cupti {

BufferPool::BufferPool(std::size_t buffer_bytes, std::size_t max_buffers)
    : buffer_bytes_(std::max<std::size_t>(8, (buffer_bytes + 7) / 8 * 8)),
      max_buffers_(std::max<std::size_t>(1, max_buffers)) {}

std::uint8_t* BufferPool::acquire() noexcept {
  std::lock_guard lock(mu_);
  if (!free_.empty()) {
    std::uint8_t* b = free_.back();
    free_.pop_back();
    return b;
  }
  if (owned_.size() >= max_buffers_) {
    ++refused_;
    return nullptr;
  }
  try {
    // operator new[] of uint8_t is aligned for any fundamental type, so 8-byte aligned as CUPTI requires.
    owned_.push_back(std::make_unique_for_overwrite<std::uint8_t[]>(buffer_bytes_));
    free_.reserve(max_buffers_);
    return owned_.back().get();
  } catch (const std::bad_alloc&) {
    ++refused_;
    return nullptr;
  }
}

void BufferPool::release(std::uint8_t* buffer) noexcept {
  if (buffer == nullptr) return;
  std::lock_guard lock(mu_);
  bool ours = std::any_of(owned_.begin(), owned_.end(), [&](const auto& p) { return p.get() == buffer; });
  bool already_free = std::find(free_.begin(), free_.end(), buffer) != free_.end();
  if (ours && !already_free) free_.push_back(buffer);  // reserve() in acquire: push_back cannot throw here
}

std::size_t BufferPool::allocated() const {
  std::lock_guard lock(mu_);
  return owned_.size();
}

std::size_t BufferPool::in_use() const {
  std::lock_guard lock(mu_);
  return owned_.size() - free_.size();
}

std::uint64_t BufferPool::refused() const {
  std::lock_guard lock(mu_);
  return refused_;
}

}  // namespace gearshift::cupti
