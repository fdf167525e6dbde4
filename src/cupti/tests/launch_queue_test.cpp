#include "cupti/launch_queue.hpp"

#include <gtest/gtest.h>

#include <thread>
#include <vector>

namespace gearshift::cupti {
namespace {

LaunchEvent event(std::uint32_t corr) { return LaunchEvent{corr, LaunchApi::kernel, 1000 + corr, nullptr}; }

TEST(LaunchQueue, PopsInPushOrder) {
  LaunchQueue q(8);
  for (std::uint32_t i = 1; i <= 5; ++i) ASSERT_TRUE(q.push(event(i)));
  LaunchEvent e;
  for (std::uint32_t i = 1; i <= 5; ++i) {
    ASSERT_TRUE(q.pop(e));
    EXPECT_EQ(e.correlation, i);
    EXPECT_EQ(e.cpu_ns, 1000 + i);
  }
  EXPECT_FALSE(q.pop(e));
}

TEST(LaunchQueue, DropsAndCountsWhenFullThenRecovers) {
  LaunchQueue q(5);  // rounded up to 8
  ASSERT_EQ(q.capacity(), 8u);
  for (std::uint32_t i = 1; i <= 8; ++i) ASSERT_TRUE(q.push(event(i)));
  EXPECT_FALSE(q.push(event(9)));
  EXPECT_FALSE(q.push(event(10)));
  EXPECT_EQ(q.dropped(), 2u);
  LaunchEvent e;
  ASSERT_TRUE(q.pop(e));
  EXPECT_EQ(e.correlation, 1u);
  EXPECT_TRUE(q.push(event(11)));  // one slot free again, and it wraps around
  std::vector<std::uint32_t> rest;
  while (q.pop(e)) rest.push_back(e.correlation);
  EXPECT_EQ(rest, (std::vector<std::uint32_t>{2, 3, 4, 5, 6, 7, 8, 11}));
}

// Two launching threads (PyTorch's main and autograd threads) and the writer draining at the same time:
// nothing lost or duplicated while there is room, each producer's events in its own order.
TEST(LaunchQueue, TwoProducersOneConsumerLoseNothing) {
  constexpr std::uint32_t kPerThread = 200'000;
  LaunchQueue q(1024);
  std::atomic<int> done{0};
  auto produce = [&](std::uint32_t base) {
    for (std::uint32_t i = 0; i < kPerThread; ++i)
      while (!q.push(event(base + i))) std::this_thread::yield();  // the test retries; the tracer drops
    done.fetch_add(1);
  };
  std::thread a(produce, 0u), b(produce, 1u << 30);
  std::uint32_t next_a = 0, next_b = 1u << 30;
  std::uint64_t got = 0, out_of_order = 0;
  LaunchEvent e;
  for (;;) {
    const bool finished = done.load() == 2;  // read before the pop: nothing can be pushed after it
    if (q.pop(e)) {
      std::uint32_t& next = e.correlation >= (1u << 30) ? next_b : next_a;
      out_of_order += e.correlation != next;
      next = e.correlation + 1;
      ++got;
      continue;
    }
    if (finished) break;
  }
  a.join();
  b.join();
  EXPECT_EQ(got, 2u * kPerThread);
  EXPECT_EQ(out_of_order, 0u);
  EXPECT_EQ(next_a, kPerThread);
  EXPECT_EQ(next_b, (1u << 30) + kPerThread);
}

}  // namespace
}  // namespace gearshift::cupti
