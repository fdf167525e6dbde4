// The runtime's control pipe into the injection library: command parsing and the non-blocking reader.
#include "cupti/feed_control.hpp"

#include <unistd.h>

#include <gtest/gtest.h>

namespace gearshift::cupti {
namespace {

// The windows of an A line (asserting it parsed as one).
ActivityWindows windows_of(std::string_view line) {
  auto c = parse_control_line(line);
  EXPECT_TRUE(c && c->windows && !c->marker_period_us) << line;
  return c && c->windows ? *c->windows : ActivityWindows{-1, -1};
}

TEST(FeedControl, ParsesActivityCommands) {
  EXPECT_FALSE(windows_of("A 0 0").sampled());
  const ActivityWindows sampled = windows_of("A 5000 200 ");
  EXPECT_EQ(sampled.period_ms, 5000);
  EXPECT_EQ(sampled.window_ms, 200);
  EXPECT_TRUE(sampled.sampled());
  EXPECT_TRUE(windows_of("A 100 0").sampled());
  EXPECT_FALSE(parse_control_line("A 100 200"));  // window longer than the period
  EXPECT_FALSE(parse_control_line("A 100"));
  EXPECT_FALSE(parse_control_line("A -1 0"));
  EXPECT_FALSE(parse_control_line("A 1 0 7"));
  EXPECT_FALSE(parse_control_line("B 1 0"));
  EXPECT_FALSE(parse_control_line(""));
}

TEST(FeedControl, ParsesMarkerCommands) {
  auto m = parse_control_line("M 2000");
  ASSERT_TRUE(m && m->marker_period_us);
  EXPECT_EQ(*m->marker_period_us, 2000);
  EXPECT_FALSE(m->windows);
  auto off = parse_control_line("M 0 ");
  ASSERT_TRUE(off && off->marker_period_us);
  EXPECT_EQ(*off->marker_period_us, 0);
  EXPECT_FALSE(parse_control_line("M"));
  EXPECT_FALSE(parse_control_line("M -5"));
  EXPECT_FALSE(parse_control_line("M 10 10"));
  EXPECT_FALSE(parse_control_line("M2000"));
}

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
  EXPECT_EQ(w.windows->period_ms, 100);
  EXPECT_FALSE(w.marker_period_us);
  ASSERT_EQ(write(p[1], "00 20\nnonsense\nM 500\nA 0 0\nM 2000\n", 34), 34);
  w = c.poll();
  ASSERT_TRUE(w.windows);
  EXPECT_EQ(w.windows->period_ms, 0);  // "A 5000 20", then "A 0 0": the last one of each kind
  ASSERT_TRUE(w.marker_period_us);
  EXPECT_EQ(*w.marker_period_us, 2000);
  EXPECT_EQ(c.invalid_lines(), 1);
  close(p[1]);
  EXPECT_TRUE(c.poll().empty());
  EXPECT_TRUE(c.poll().empty());
}

}  // namespace
}  // namespace gearshift::cupti
