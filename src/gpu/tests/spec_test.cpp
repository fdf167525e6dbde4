#include "gpu/spec.hpp"

#include <gtest/gtest.h>

#include <algorithm>

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

TEST(GpuSpec, V100MatchesThePublicFigures) {
  GpuSpec s = find_spec("v100");
  ASSERT_EQ(s.sm_clocks_mhz.size(), 187u);  // every supported V100 clock, 7 and 8 MHz apart (synergy-sc-ae sweep)
  EXPECT_EQ(std::vector<int>(s.sm_clocks_mhz.begin(), s.sm_clocks_mhz.begin() + 5),
            (std::vector<int>{135, 142, 150, 157, 165}));
  EXPECT_EQ(s.sm_clocks_mhz[s.sm_clocks_mhz.size() - 2], 1522);
  EXPECT_EQ(s.max_sm_clock_mhz(), 1530);
  EXPECT_EQ(s.mem_clocks_mhz, (std::vector<int>{877}));
  EXPECT_EQ(s.default_sm_clock_mhz, 1530);
  EXPECT_DOUBLE_EQ(s.power_limit_max_w, 300);
  EXPECT_DOUBLE_EQ(s.power_limit_default_w, 300);
  EXPECT_DOUBLE_EQ(s.power_limit_min_w, 150);
  EXPECT_DOUBLE_EQ(s.switch_latency_ns, 20e6);
}

TEST(GpuSpec, B200MatchesThePublicFigures) {
  GpuSpec s = find_spec("b200");
  ASSERT_EQ(s.sm_clocks_mhz.size(), 124u);  // 120..1965 step 15
  EXPECT_EQ(s.min_sm_clock_mhz(), 120);
  EXPECT_EQ(s.max_sm_clock_mhz(), 1965);
  EXPECT_EQ(s.mem_clocks_mhz, (std::vector<int>{3996}));
  EXPECT_DOUBLE_EQ(s.power_limit_default_w, 1000);
  EXPECT_DOUBLE_EQ(s.max_board_power_w, 1000);
}

// Every figure of every spec names where it comes from (a public source, or "estimate"; the newer specs say why).
TEST(GpuSpec, EverySpecSourcesEveryFigure) {
  for (const auto& n : spec_names()) {
    GpuSpec s = find_spec(n);
    for (const char* field : {"sm_clocks_mhz", "mem_clocks_mhz", "power_limit_w", "idle_power_w", "voltage_knee_mhz",
                              "memory_power_w_at_max_clock", "switch_latency_ms", "energy_counter_update_ms"}) {
      auto it = std::find_if(s.sources.begin(), s.sources.end(), [&](const auto& p) { return p.first == field; });
      ASSERT_NE(it, s.sources.end()) << n << " lacks a source for " << field;
      EXPECT_FALSE(it->second.empty()) << n << ": " << field;
      if (n == "v100" || n == "b200") {
        EXPECT_GT(it->second.size(), 20u) << n << ": an estimate says why: " << field;
      }
    }
    EXPECT_TRUE(std::is_sorted(s.sm_clocks_mhz.begin(), s.sm_clocks_mhz.end())) << n;
    EXPECT_LE(s.power_limit_default_w, s.power_limit_max_w) << n;
    EXPECT_LT(s.idle_power_min_clock_w, s.idle_power_max_clock_w) << n;
    EXPECT_GT(s.voltage_knee_mhz, s.min_sm_clock_mhz()) << n;
    EXPECT_LT(s.voltage_knee_mhz, s.max_sm_clock_mhz()) << n;
  }
  EXPECT_EQ(spec_names(), (std::vector<std::string>{"a100", "a40", "b200", "h100", "h200", "rtx3080ti", "v100"}));
}

TEST(GpuSpec, FractionalClockStepIsFloored) {
  GpuSpec s = parse_spec(R"({"name":"x","full_name":"X","sm_clocks_mhz":{"min":100,"max":130,"step":7.5},
    "mem_clocks_mhz":[500],"default_sm_clock_mhz":130,"default_mem_clock_mhz":500,
    "power_limit_w":{"min":1,"max":2,"default":2},"idle_power_w":{"at_min_sm_clock":1,"at_max_sm_clock":2},
    "max_board_power_w":2,"voltage_knee_mhz":110,"memory_power_w_at_max_clock":1,"switch_latency_ms":1,
    "energy_counter_update_ms":100,"sources":{}})",
                         "x.json");
  EXPECT_EQ(s.sm_clocks_mhz, (std::vector<int>{100, 107, 115, 122, 130}));
}

// The file's ms and µs become ns once, at load (docs/design.md, "Units").
TEST(GpuSpec, TimesAreConvertedToNsAtLoad) {
  GpuSpec s = parse_spec(R"({"name":"x","full_name":"X","sm_clocks_mhz":{"min":100,"max":130,"step":10},
    "mem_clocks_mhz":[500],"default_sm_clock_mhz":130,"default_mem_clock_mhz":500,
    "power_limit_w":{"min":1,"max":2,"default":2},"idle_power_w":{"at_min_sm_clock":1,"at_max_sm_clock":2},
    "max_board_power_w":2,"voltage_knee_mhz":110,"memory_power_w_at_max_clock":1,"switch_latency_ms":0.25,
    "energy_counter_update_ms":20.5,"gap_power_decay_us":70,"power_limit_window_us":600,"sources":{}})",
                         "x.json");
  EXPECT_DOUBLE_EQ(s.switch_latency_ns, 250'000);
  EXPECT_DOUBLE_EQ(s.power_limit_window_ns, 600'000);
  EXPECT_EQ(s.energy_counter_update_ns, 20'500'000);
  EXPECT_DOUBLE_EQ(s.gap_power_decay_ns, 70'000);
  const GpuSpec h200 = find_spec("h200");
  EXPECT_DOUBLE_EQ(h200.switch_latency_ns, 6e6);
  EXPECT_EQ(h200.energy_counter_update_ns, 100'000'000);
  EXPECT_DOUBLE_EQ(h200.gap_power_decay_ns, 70'000);
  EXPECT_DOUBLE_EQ(h200.power_limit_window_ns, 600'000);
  EXPECT_DOUBLE_EQ(find_spec("a100").power_limit_window_ns, 0);  // not measured: the limit binds per kernel
}

TEST(GpuSpec, ANegativePowerLimitWindowIsAnError) {
  try {
    parse_spec(R"({"name":"x","full_name":"X","sm_clocks_mhz":{"min":100,"max":130,"step":10},
      "mem_clocks_mhz":[500],"default_sm_clock_mhz":130,"default_mem_clock_mhz":500,
      "power_limit_w":{"min":1,"max":2,"default":2},"idle_power_w":{"at_min_sm_clock":1,"at_max_sm_clock":2},
      "max_board_power_w":2,"voltage_knee_mhz":110,"memory_power_w_at_max_clock":1,"switch_latency_ms":0.25,
      "energy_counter_update_ms":20.5,"power_limit_window_us":-1,"sources":{}})",
               "x.json");
    FAIL() << "expected an error";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("x.json: power_limit_window_us must be >= 0"), std::string::npos) << e.what();
  }
}

TEST(GpuSpec, DeviceNamesFindTheirSpec) {
  EXPECT_EQ(find_spec("Tesla V100-SXM2-32GB").name, "v100");
  EXPECT_EQ(find_spec("NVIDIA B200").name, "b200");
  EXPECT_EQ(find_spec("NVIDIA H100 80GB HBM3").name, "h100");
  EXPECT_THROW(find_spec("NVIDIA GeForce RTX 2080 Ti"), std::invalid_argument);
}

TEST(GpuSpec, UnknownNameListsKnownSpecs) {
  try {
    find_spec("b300");
    FAIL() << "expected an error";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("h200"), std::string::npos);
    EXPECT_NE(std::string(e.what()).find("v100"), std::string::npos);
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
  EXPECT_EQ(spec_name_for_device("NVIDIA B200"), "b200");
  EXPECT_EQ(spec_name_for_device("Tesla V100-SXM2-32GB"), "v100");
  EXPECT_EQ(spec_name_for_device("Tesla V100-SXM2-16GB"), "v100");
  EXPECT_EQ(spec_name_for_device("Tesla V100-DGXS-32GB"), "v100");
  EXPECT_EQ(spec_name_for_device("NVIDIA GB200"), "");  // Grace Blackwell: another board, no spec
  EXPECT_EQ(spec_name_for_device("NVIDIA B300 SXM6 AC"), "");
  EXPECT_EQ(spec_name_for_device("NVIDIA GeForce RTX 2080 Ti"), "");
  EXPECT_EQ(spec_name_for_device(""), "");
  // Another board of a GPU with a spec has other clocks and limits: no spec (held "h100" / "a100" / "h200").
  std::string why;
  EXPECT_EQ(spec_name_for_device("NVIDIA H100 PCIe", &why), "");
  EXPECT_EQ(why, "a PCIe card, not the SXM board of the h100 spec");
  EXPECT_EQ(spec_name_for_device("NVIDIA H200 NVL", &why), "");
  EXPECT_EQ(why, "an NVL card, not the SXM board of the h200 spec");
  EXPECT_EQ(spec_name_for_device("NVIDIA A100-SXM4-40GB", &why), "");
  EXPECT_EQ(why, "a 40 GB board, not the 80 GB of the a100 spec");
  EXPECT_EQ(spec_name_for_device("NVIDIA A100-PCIE-40GB"), "");
  EXPECT_EQ(spec_name_for_device("Tesla V100-PCIE-16GB"), "");
  EXPECT_EQ(spec_name_for_device("NVIDIA A100 80GB PCIe"), "");
  why.clear();
  EXPECT_EQ(spec_name_for_device("NVIDIA A100-SXM4-80GB", &why), "a100");
  EXPECT_EQ(why, "");
}

}  // namespace gearshift::gpu
