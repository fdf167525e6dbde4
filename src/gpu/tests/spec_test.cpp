#include "gpu/spec.hpp"

#include <gtest/gtest.h>

namespace gearshift::gpu {

TEST(GpuSpec, H200MatchesTheMeasuredFacts) {
  GpuSpec s = find_spec("h200");
  ASSERT_EQ(s.sm_clocks_mhz.size(), 110u);  // 345..1980 step 15, read on a real H200
  EXPECT_EQ(s.sm_clocks_mhz.front(), 345);
  EXPECT_EQ(s.sm_clocks_mhz.back(), 1980);
  EXPECT_EQ(s.mem_clocks_mhz, (std::vector<int>{2201, 3201}));
  EXPECT_DOUBLE_EQ(s.power_limit_default_w, 700);
  EXPECT_DOUBLE_EQ(s.idle_power_min_clock_w, 78);
  EXPECT_DOUBLE_EQ(s.idle_power_max_clock_w, 122);
  EXPECT_FALSE(s.sources.empty());
}

TEST(GpuSpec, EveryEmbeddedSpecParses) {
  for (const auto& n : spec_names()) {
    GpuSpec s = find_spec(n);
    EXPECT_EQ(s.name, n);
    EXPECT_GT(s.sm_clocks_mhz.size(), 10u) << n;
    EXPECT_LE(s.default_sm_clock_mhz, s.max_sm_clock_mhz()) << n;
  }
}

TEST(GpuSpec, NamesAreNormalised) {
  EXPECT_EQ(find_spec("H200-SXM").name, "h200");
  EXPECT_EQ(find_spec("A100 SXM4 80GB").name, "a100");
}

TEST(GpuSpec, UnknownNameListsKnownSpecs) {
  try {
    find_spec("b200");
    FAIL() << "expected an error";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("h200"), std::string::npos);
  }
}

TEST(GpuSpec, BadJsonNamesOriginAndField) {
  try {
    parse_spec(R"({"name":"x"})", "my.json");
    FAIL();
  } catch (const std::invalid_argument& e) {
    std::string m = e.what();
    EXPECT_NE(m.find("my.json"), std::string::npos);
    EXPECT_NE(m.find("full_name"), std::string::npos);
  }
  EXPECT_THROW(parse_spec("{", "x.json"), std::invalid_argument);
}

TEST(Spec, NameForNvmlDeviceName) {
  EXPECT_EQ(spec_name_for_device("NVIDIA H200"), "h200");
  EXPECT_EQ(spec_name_for_device("NVIDIA H200 SXM 141GB (simulated)"), "h200");
  EXPECT_EQ(spec_name_for_device("NVIDIA H100 80GB HBM3"), "h100");
  EXPECT_EQ(spec_name_for_device("NVIDIA A100-SXM4-80GB"), "a100");
  EXPECT_EQ(spec_name_for_device("NVIDIA A40"), "a40");
  EXPECT_EQ(spec_name_for_device("NVIDIA GeForce RTX 3080 Ti"), "rtx3080ti");
  EXPECT_EQ(spec_name_for_device("NVIDIA RTX A1000"), "");  // "a1000" is not "a100"
  EXPECT_EQ(spec_name_for_device("NVIDIA B200"), "");
  EXPECT_EQ(spec_name_for_device(""), "");
}

}  // namespace gearshift::gpu
