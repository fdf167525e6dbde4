#include "runtime/clock_plan.hpp"

#include <gtest/gtest.h>

namespace gearshift::runtime {
namespace {

nlohmann::json plan_json() {
  return nlohmann::json::parse(R"json({
    "format": "gearshift-plan", "version": 1, "gpu": "h200", "period_us": 100, "switch_latency_us": 6000,
    "positions": [
      {"name": "gemm", "kind": "kernel", "duration_us": 40, "start_offset_us": 0, "sm_clock_mhz": 1980, "mem_clock_mhz": 3201},
      {"name": "Memset (Device)", "kind": "memset", "duration_us": 1, "start_offset_us": 41, "sm_clock_mhz": 1500, "mem_clock_mhz": 3201},
      {"name": "softmax", "kind": "kernel", "duration_us": 30, "start_offset_us": 50, "sm_clock_mhz": 1500, "mem_clock_mhz": 3201}
    ]})json");
}

TEST(ClockPlan, ReadsPositionsKindsAndDefaults) {
  ClockPlan p = plan_from_json(plan_json(), "test");
  ASSERT_EQ(p.size(), 3u);
  EXPECT_DOUBLE_EQ(p.period_ns, 100e3);
  EXPECT_DOUBLE_EQ(p.switch_latency_ns, 6e6);
  EXPECT_TRUE(p.positions[0].kernel);
  EXPECT_FALSE(p.positions[1].kernel);
  EXPECT_TRUE(p.positions[2].kernel);
  EXPECT_DOUBLE_EQ(p.positions[2].start_offset_ns, 50e3);
  EXPECT_EQ(p.positions[1].clocks.sm_mhz, 1500);
  EXPECT_EQ(p.change_positions(), (std::vector<std::size_t>{0, 1}));
}

TEST(ClockPlan, KernelsOnlyDropsCopiesAndKeepsOffsets) {
  ClockPlan k = plan_from_json(plan_json(), "test").kernels_only();
  ASSERT_EQ(k.size(), 2u);
  EXPECT_EQ(k.positions[0].name, "gemm");
  EXPECT_EQ(k.positions[1].name, "softmax");
  EXPECT_DOUBLE_EQ(k.positions[1].start_offset_ns, 50e3);
  EXPECT_DOUBLE_EQ(k.period_ns, 100e3);
}

// One pair only where every position holds it: a plan whose pairs differ anywhere (here a copy's) has none.
TEST(ClockPlan, OnePairOnlyWhereNoPositionDiffers) {
  ClockPlan p = plan_from_json(plan_json(), "test");
  EXPECT_FALSE(p.one_pair());
  for (auto& x : p.positions) x.clocks = {1410, 3201};
  ASSERT_TRUE(p.one_pair());
  EXPECT_EQ(p.one_pair()->sm_mhz, 1410);
  EXPECT_EQ(p.one_pair()->mem_mhz, 3201);
  p.positions[1].clocks.mem_mhz = 2619;  // the memset's memory clock alone
  EXPECT_FALSE(p.one_pair());
  EXPECT_FALSE(ClockPlan{}.one_pair());
}

TEST(ClockPlan, AGraphLaunchIsOnePosition) {
  nlohmann::json j = plan_json();
  // gemm and the memset ran in one launch of graph 9: one position for the runtime, spanning both.
  for (int i : {0, 1}) {
    j["positions"][i]["graph"] = 9;
    j["positions"][i]["graph_launch"] = 0;
    j["positions"][i]["sm_clock_mhz"] = 1980;
  }
  ClockPlan p = plan_from_json(j, "test");
  ASSERT_EQ(p.size(), 2u);
  EXPECT_EQ(p.positions[0].name, "cudaGraphLaunch graph=9");
  EXPECT_TRUE(p.positions[0].kernel);
  EXPECT_EQ(p.positions[0].ops, 2u);
  EXPECT_DOUBLE_EQ(p.positions[0].duration_ns, 42e3);  // 0 .. 41 + 1 µs
  EXPECT_EQ(p.positions[1].name, "softmax");
  EXPECT_EQ(p.kernels_only().size(), 2u);
}

TEST(ClockPlan, AClockChangeInsideAGraphLaunchIsRefused) {
  nlohmann::json j = plan_json();
  for (int i : {0, 1}) {
    j["positions"][i]["graph"] = 9;
    j["positions"][i]["graph_launch"] = 0;
  }
  try {
    plan_from_json(j, "p.json");
    FAIL() << "accepted";
  } catch (const PlanError& e) {
    EXPECT_NE(std::string(e.what()).find("p.json: positions[1]: a clock change inside CUDA graph launch 0"),
              std::string::npos)
        << e.what();
  }
}

TEST(ClockPlan, BadKindIsAClearError) {
  nlohmann::json j = plan_json();
  j["positions"][1]["kind"] = 3;
  try {
    plan_from_json(j, "p.json");
    FAIL() << "no error";
  } catch (const PlanError& e) {
    EXPECT_STREQ(e.what(), "p.json: positions[1]: 'kind' is 3, not a string");
  }
}

// plan-ranks wrote positions without "kind", which the runtime read as kernels (a memcpy then counted as a missing
// kernel launch on every step): a position without kind is refused now.
TEST(ClockPlan, PositionWithoutKindIsRefused) {
  nlohmann::json j = plan_json();
  j["positions"][1].erase("kind");
  try {
    plan_from_json(j, "p.json");
    FAIL() << "no error";
  } catch (const PlanError& e) {
    EXPECT_NE(std::string(e.what()).find("p.json: positions[1]: missing field 'kind'"), std::string::npos) << e.what();
  }
}

TEST(ClockPlan, VariantsAndLaunchOffsetsFollowThePositionsTheRuntimeKeeps) {
  nlohmann::json j = plan_json();
  j["positions"][0]["launch_offset_us"] = 2;
  j["positions"][2]["launch_offset_us"] = 1;
  // A block after the memset (a kernel and a copy), one of copies only, and a skip of the memset and softmax.
  j["variants"] = nlohmann::json::parse(R"json([
    {"after": 1, "ops": [{"name": "clip", "kind": "kernel"}, {"name": "Memcpy DtoD", "kind": "memcpy"}], "steps": 4},
    {"after": 2, "ops": [{"name": "Memset (Device)", "kind": "memset"}], "steps": 3},
    {"after": 0, "skip": 2, "steps": 2}])json");
  const ClockPlan p = plan_from_json(j, "test");
  ASSERT_EQ(p.variants.size(), 3u);
  EXPECT_EQ(p.variants[0].ops.size(), 2u);
  EXPECT_FALSE(p.variants[0].ops[1].second);
  ASSERT_TRUE(p.positions[2].launch_offset_ns.has_value());
  EXPECT_DOUBLE_EQ(*p.positions[2].launch_offset_ns, 1e3);
  EXPECT_FALSE(p.positions[1].launch_offset_ns.has_value());
  const ClockPlan k = p.kernels_only();  // gemm, softmax
  ASSERT_EQ(k.variants.size(), 2u);  // the copies-only block is no launch the feed sees
  EXPECT_EQ(k.variants[0].after, 0);  // after the memset = after gemm, the kernel before it
  ASSERT_EQ(k.variants[0].ops.size(), 1u);
  EXPECT_EQ(k.variants[0].ops[0].first, "clip");
  EXPECT_EQ(k.variants[1].after, 0);
  EXPECT_EQ(k.variants[1].skip, 1u);  // the memset is gone: softmax alone left out
}

}  // namespace
}  // namespace gearshift::runtime
