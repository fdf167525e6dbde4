// Activity buffers handed to CUPTI: fixed size, recycled, capped. When the cap is reached the request is
// refused (CUPTI then drops records and counts them; we count the refusals).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <vector>

namespace gearshift::cupti {

class BufferPool {
 public:
  // `buffer_bytes` is rounded up to a multiple of 8 (CUPTI's alignment); at least one buffer is allowed.
  BufferPool(std::size_t buffer_bytes, std::size_t max_buffers);

  // A free buffer (recycled, else newly allocated while under the cap), or nullptr when all are in use.
  std::uint8_t* acquire() noexcept;
  // Returns a buffer got from acquire(); a pointer this pool does not own is ignored.
  void release(std::uint8_t* buffer) noexcept;

  std::size_t buffer_bytes() const { return buffer_bytes_; }
  std::size_t allocated() const;  // buffers allocated so far (<= max)
  std::size_t in_use() const;
  std::uint64_t refused() const;  // acquire() calls answered nullptr

 private:
  std::size_t buffer_bytes_;
  std::size_t max_buffers_;
  mutable std::mutex mu_;
  std::vector<std::unique_ptr<std::uint8_t[]>> owned_;
  std::vector<std::uint8_t*> free_;
  std::uint64_t refused_ = 0;
};

}  // namespace gearshift::cupti
