// The runtime's control commands into the injection library: the non-blocking reader (the commands' own
// parsing: src/feed/tests/protocol_test.cpp).
#include "cupti/feed_control.hpp"

#include <unistd.h>

#include <gtest/gtest.h>

namespace gearshift::cupti {
namespace {

// Partial lines wait for their end; the last valid command of what arrived wins; bad lines are counted; end of
// file ends reading (the pipe is closed, not polled again).
TEST(FeedControl, ReadsWholeLinesWithoutBlocking) {
  int p[2];
  ASSERT_EQ(pipe(p), 0);
  FeedControl c(p[0]);
  EXPECT_TRUE(c.poll().empty());  // nothing written: returns at once
  ASSERT_EQ(write(p[1], "A 100 10\nA 50", 13), 13);
  auto w = c.poll();
  ASSERT_TRUE(w.windows);
  EXPECT_EQ(w.windows->period_ns, 100'000'000);  // the wire's ms as ns
  EXPECT_EQ(w.windows->window_ns, 10'000'000);
  EXPECT_FALSE(w.marker_period_ns);
  ASSERT_EQ(write(p[1], "00 20\nnonsense\nM 500\nA 0 0\nM 2000\n", 34), 34);
  w = c.poll();
  ASSERT_TRUE(w.windows);
  EXPECT_EQ(w.windows->period_ns, 0);  // "A 5000 20", then "A 0 0": the last one of each kind
  ASSERT_TRUE(w.marker_period_ns);
  EXPECT_EQ(*w.marker_period_ns, 2'000'000);  // the wire's µs as ns
  EXPECT_EQ(c.invalid_lines(), 1);
  EXPECT_FALSE(w.off);
  ASSERT_EQ(write(p[1], "O\nA 100 10\n", 12), 12);  // the feed off stays asked for, whatever follows
  w = c.poll();
  EXPECT_TRUE(w.off);
  EXPECT_TRUE(w.windows);
  close(p[1]);
  EXPECT_TRUE(c.poll().empty());
  EXPECT_TRUE(c.poll().empty());
}

}  // namespace
}  // namespace gearshift::cupti
