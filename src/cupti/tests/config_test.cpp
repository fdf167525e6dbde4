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
  EXPECT_DOUBLE_EQ(c.duration_s, 2.5);
  EXPECT_EQ(c.buffer_bytes, 8u << 20);
  EXPECT_EQ(c.max_buffers, 4u);
  EXPECT_EQ(c.sample_period_ms, 0);
  EXPECT_TRUE(c.quiet);
  EXPECT_TRUE(c.all_ranges);
}

TEST(TracerConfig, MalformedValuesKeepDefaultsAndWarn) {
  std::vector<std::string> w;
  auto c = parse({{kEnvSteps, "five"}, {kEnvDuration, "-1"}, {kEnvBufferMb, "0"}, {kEnvSampleMs, "10ms"}}, &w);
  EXPECT_EQ(w.size(), 4u);
  EXPECT_EQ(c.steps, 0);
  EXPECT_EQ(c.duration_s, 0);
  EXPECT_EQ(c.buffer_bytes, 4u << 20);
  EXPECT_EQ(c.sample_period_ms, 10);
  EXPECT_TRUE(c.output.empty());
}

TEST(TracerConfig, StepMarkers) {
  EXPECT_TRUE(is_step_marker("gearshift.step"));
  EXPECT_TRUE(is_step_marker("ProfilerStep#12"));
  EXPECT_FALSE(is_step_marker("forward"));
}
