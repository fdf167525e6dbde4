#include <gtest/gtest.h>

#include <thread>
#include <vector>

#include "cupti/launch_table.hpp"

using gearshift::cupti::LaunchApi;
using gearshift::cupti::LaunchTable;

TEST(LaunchTable, RecordsAndLooksUpByCorrelation) {
  LaunchTable t(1000);  // rounded up to 1024
  EXPECT_EQ(t.slots(), 1024u);
  t.record(7, LaunchApi::kernel);
  t.record(8, LaunchApi::graph);
  t.record(9, LaunchApi::kernel_ex);
  EXPECT_EQ(t.lookup(7), LaunchApi::kernel);
  EXPECT_EQ(t.lookup(8), LaunchApi::graph);
  EXPECT_EQ(t.lookup(9), LaunchApi::kernel_ex);
  EXPECT_EQ(t.lookup(10), LaunchApi::unknown);
  EXPECT_EQ(t.launches(LaunchApi::kernel), 1u);
  EXPECT_EQ(t.launches(LaunchApi::graph), 1u);
  EXPECT_EQ(t.total_launches(), 3u);
}

TEST(LaunchTable, ReusedSlotAnswersUnknownForTheOldId) {
  LaunchTable t(16);
  t.record(3, LaunchApi::cooperative_kernel);
  t.record(3 + 16, LaunchApi::kernel);  // same slot
  EXPECT_EQ(t.lookup(3), LaunchApi::unknown);
  EXPECT_EQ(t.lookup(19), LaunchApi::kernel);
}

TEST(LaunchTable, CountsLaunchesFromSeveralThreads) {
  LaunchTable t(1 << 12);
  std::vector<std::thread> threads;
  for (std::uint32_t k = 0; k < 4; ++k)
    threads.emplace_back([&t, k] {
      for (std::uint32_t i = 0; i < 1000; ++i) t.record(k * 1000 + i + 1, LaunchApi::kernel);
    });
  for (auto& th : threads) th.join();
  EXPECT_EQ(t.launches(LaunchApi::kernel), 4000u);
  EXPECT_EQ(t.lookup(2500), LaunchApi::kernel);
}
