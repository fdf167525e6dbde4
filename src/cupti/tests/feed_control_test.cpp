// The runtime's control pipe into the injection library: command parsing and the non-blocking reader.
#include "cupti/feed_control.hpp"

#include <unistd.h>

#include <gtest/gtest.h>

namespace gearshift::cupti {
namespace {

TEST(FeedControl, ParsesActivityCommands) {
  auto every = parse_control_line("A 0 0");
  ASSERT_TRUE(every);
  EXPECT_FALSE(every->sampled());
  auto sampled = parse_control_line("A 5000 200 ");
  ASSERT_TRUE(sampled);
  EXPECT_EQ(sampled->period_ms, 5000);
  EXPECT_EQ(sampled->window_ms, 200);
  EXPECT_TRUE(sampled->sampled());
  auto none = parse_control_line("A 100 0");
  ASSERT_TRUE(none);
  EXPECT_TRUE(none->sampled());
  EXPECT_FALSE(parse_control_line("A 100 200"));  // window longer than the period
  EXPECT_FALSE(parse_control_line("A 100"));
  EXPECT_FALSE(parse_control_line("A -1 0"));
  EXPECT_FALSE(parse_control_line("A 1 0 7"));
  EXPECT_FALSE(parse_control_line("B 1 0"));
  EXPECT_FALSE(parse_control_line(""));
}

// Partial lines wait for their end; the last valid command of what arrived wins; bad lines are counted; end of
// file ends reading (the pipe is closed, not polled again).
TEST(FeedControl, ReadsWholeLinesWithoutBlocking) {
  int p[2];
  ASSERT_EQ(pipe(p), 0);
  FeedControl c(p[0]);
  EXPECT_FALSE(c.poll());  // nothing written: returns at once
  ASSERT_EQ(write(p[1], "A 100 10\nA 50", 13), 13);
  auto w = c.poll();
  ASSERT_TRUE(w);
  EXPECT_EQ(w->period_ms, 100);
  ASSERT_EQ(write(p[1], "00 20\nnonsense\nA 0 0\n", 21), 21);
  w = c.poll();
  ASSERT_TRUE(w);
  EXPECT_EQ(w->period_ms, 0);  // "A 5000 20", then "A 0 0": the last one
  EXPECT_EQ(c.invalid_lines(), 1);
  close(p[1]);
  EXPECT_FALSE(c.poll());
  EXPECT_FALSE(c.poll());
}

}  // namespace
}  // namespace gearshift::cupti
