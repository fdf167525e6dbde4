#include <gtest/gtest.h>

#include <map>
#include <string>

#include "cupti/config.hpp"

using namespace gearshift::cupti;

namespace {
TracerConfig parse(const std::map<std::string, std::string>& env, std::vector<std::string>* warnings) {
  return config_from_env(
      [&](const char* k) -> const char* {
        auto it = env.find(k);
        return it == env.end() ? nullptr : it->second.c_str();
      },
      warnings);
}
}  // namespace

TEST(TracerConfig, ReadsEnvironment) {
  std::vector<std::string> w;
  auto c = parse({{kEnvOutput, "/tmp/t.jsonl.gz"}, {kEnvSteps, "5"}, {kEnvDuration, "2.5"}, {kEnvBufferMb, "8"},
                  {kEnvMaxBuffers, "4"}, {kEnvSampleMs, "0"}, {kEnvQuiet, "1"}, {kEnvAllRanges, "1"}},
                 &w);
  EXPECT_TRUE(w.empty());
  EXPECT_EQ(c.output, "/tmp/t.jsonl.gz");
  EXPECT_EQ(c.steps, 5);
  EXPECT_EQ(c.duration_ns, 2'500'000'000);  // the variables' s, ms and µs are ns from here on
  EXPECT_EQ(c.buffer_bytes, 8u << 20);
  EXPECT_EQ(c.max_buffers, 4u);
  EXPECT_EQ(c.sample_period_ns, 0);
  EXPECT_TRUE(c.quiet);
  EXPECT_TRUE(c.all_ranges);
}

TEST(TracerConfig, MalformedValuesKeepDefaultsAndWarn) {
  std::vector<std::string> w;
  auto c = parse({{kEnvSteps, "five"}, {kEnvDuration, "-1"}, {kEnvBufferMb, "0"}, {kEnvSampleMs, "10ms"}}, &w);
  EXPECT_EQ(w.size(), 4u);
  EXPECT_EQ(c.steps, 0);
  EXPECT_EQ(c.duration_ns, 0);
  EXPECT_EQ(c.buffer_bytes, 4u << 20);
  EXPECT_EQ(c.sample_period_ns, 10'000'000);
  EXPECT_TRUE(c.output.empty());
}

// The injected library no longer writes Chrome JSON: a user's GEARSHIFT_TRACE_CHROME gets a note, not silence.
TEST(TracerConfig, TheRetiredChromeVariableIsSaid) {
  std::vector<std::string> w;
  parse({{kEnvOutput, "/tmp/t.jsonl.gz"}, {kEnvChrome, "/tmp/t.json"}}, &w);
  ASSERT_EQ(w.size(), 1u);
  EXPECT_NE(w[0].find("GEARSHIFT_TRACE_CHROME='/tmp/t.json' is no longer read: `gearshift trace --chrome FILE`"),
            std::string::npos)
      << w[0];
}

// The runtime feed's tuning: the control pipe, flush and writer periods, sampled kernel activity; a window
// longer than its period is refused as a whole (every kernel recorded), with a warning.
TEST(TracerConfig, FeedTuning) {
  std::vector<std::string> w;
  auto c = parse({{"GEARSHIFT_RUNTIME_SOCKET", "/tmp/gearshift-run-x/feed.sock"}, {kEnvFeedFlushMs, "50"}, {kEnvFeedPeriodUs, "5000"},
                  {kEnvFeedActivityPeriodMs, "5000"}, {kEnvFeedActivityWindowMs, "200"}},
                 &w);
  EXPECT_TRUE(w.empty());
  EXPECT_EQ(c.runtime_socket, "/tmp/gearshift-run-x/feed.sock");
  EXPECT_EQ(c.feed_flush_ns, 50'000'000);
  EXPECT_EQ(c.feed_period_ns, 5'000'000);
  EXPECT_EQ(c.feed_activity_period_ns, 5'000'000'000);
  EXPECT_EQ(c.feed_activity_window_ns, 200'000'000);

  auto d = parse({}, &w);
  EXPECT_EQ(d.runtime_socket, "");
  EXPECT_EQ(d.feed_flush_ns, 10'000'000);
  EXPECT_EQ(d.feed_period_ns, 500'000);
  EXPECT_EQ(d.feed_activity_period_ns, 0);
  EXPECT_EQ(d.sample_period_ns, 10'000'000);
  EXPECT_EQ(d.flush_period_ns, 1'000'000'000);
  EXPECT_EQ(d.feed_marker_ns, 0);
  EXPECT_EQ(parse({{kEnvFeedMarkerUs, "2000"}, {kEnvFlushMs, "250"}}, &w).feed_marker_ns, 2'000'000);
  EXPECT_EQ(parse({{kEnvFlushMs, "250"}}, &w).flush_period_ns, 250'000'000);
  EXPECT_EQ(parse({{kEnvDuration, "1e300"}}, &w).duration_ns, INT64_MAX);  // no overflow: no limit to speak of

  auto bad = parse({{kEnvFeedActivityPeriodMs, "100"}, {kEnvFeedActivityWindowMs, "200"}, {kEnvFeedPeriodUs, "10"}}, &w);
  ASSERT_EQ(w.size(), 2u);
  EXPECT_NE(w[0].find("GEARSHIFT_FEED_PERIOD_US='10'"), std::string::npos) << w[0];
  EXPECT_NE(w[1].find("GEARSHIFT_FEED_ACTIVITY_WINDOW_MS='200' is not at most GEARSHIFT_FEED_ACTIVITY_PERIOD_MS (100)"),
            std::string::npos)
      << w[1];
  EXPECT_EQ(bad.feed_activity_period_ns, 0);
  EXPECT_EQ(bad.feed_activity_window_ns, 0);
  EXPECT_EQ(bad.feed_period_ns, 500'000);
}

TEST(TracerConfig, StepMarkers) {
  EXPECT_TRUE(is_step_marker("gearshift.step"));
  EXPECT_TRUE(is_step_marker("ProfilerStep#12"));
  EXPECT_FALSE(is_step_marker("forward"));
}

// Multi-process trace naming (docs/trace-format.md): the tag goes before the extension, and each staging name
// gives its pid back.
TEST(TracerConfig, ProcessTraceNames) {
  EXPECT_EQ(insert_before_extension("/d/t.jsonl.gz", "rank1"), "/d/t.rank1.jsonl.gz");
  EXPECT_EQ(insert_before_extension("/d/t.jsonl", "rank1"), "/d/t.rank1.jsonl");
  EXPECT_EQ(insert_before_extension("/d/run.v2.json.gz", "pid7"), "/d/run.v2.pid7.json.gz");
  EXPECT_EQ(insert_before_extension("/d.x/trace", "rank3"), "/d.x/trace.rank3");
  EXPECT_EQ(insert_before_extension("/d/.gz", "rank3"), "/d/.gz.rank3");  // no name before the extension
  const std::string s = staging_trace_path("/d/t.jsonl.gz", "a1B2", 540);
  EXPECT_EQ(s, "/d/t.gs-a1B2.pid540.jsonl.gz");
  EXPECT_EQ(staging_trace_pid("/d/t.jsonl.gz", "a1B2", s), 540);
  EXPECT_EQ(staging_trace_pid("/d/t.jsonl.gz", "other", s), -1);
  EXPECT_EQ(staging_trace_pid("/d/t.jsonl.gz", "a1B2", "/d/t.gs-a1B2.pidx.jsonl.gz"), -1);
  EXPECT_EQ(staging_trace_pid("/d/t.jsonl.gz", "a1B2", "/d/t.jsonl.gz"), -1);
  std::vector<std::string> w;
  EXPECT_EQ(parse({{kEnvTraceTag, "a1B2"}}, &w).trace_tag, "a1B2");
  EXPECT_EQ(parse({{kEnvTraceTag, "../x"}}, &w).trace_tag, "");
  ASSERT_EQ(w.size(), 1u);
}
