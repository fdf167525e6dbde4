#include <gtest/gtest.h>

#include <cstdint>

#include "cupti/buffer_pool.hpp"

using gearshift::cupti::BufferPool;

TEST(BufferPool, RecyclesAndCaps) {
  BufferPool p(1001, 2);
  EXPECT_EQ(p.buffer_bytes(), 1008u);  // multiple of 8
  std::uint8_t* a = p.acquire();
  std::uint8_t* b = p.acquire();
  ASSERT_NE(a, nullptr);
  ASSERT_NE(b, nullptr);
  EXPECT_EQ(reinterpret_cast<std::uintptr_t>(a) % 8, 0u);
  EXPECT_EQ(p.acquire(), nullptr);  // cap reached
  EXPECT_EQ(p.refused(), 1u);
  EXPECT_EQ(p.in_use(), 2u);
  p.release(a);
  EXPECT_EQ(p.acquire(), a);  // recycled, not a new allocation
  EXPECT_EQ(p.allocated(), 2u);
}

TEST(BufferPool, IgnoresForeignAndDoubleRelease) {
  BufferPool p(64, 1);
  std::uint8_t foreign[64];
  std::uint8_t* a = p.acquire();
  p.release(foreign);
  p.release(a);
  p.release(a);
  EXPECT_EQ(p.in_use(), 0u);
  EXPECT_EQ(p.acquire(), a);
  EXPECT_EQ(p.acquire(), nullptr);
}
