#include "model/kernel_sweeps.hpp"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <string>

namespace gearshift::model {
namespace {

using ::testing::HasSubstr;

template <typename F>
std::string error_of(F&& f) {
  try {
    f();
  } catch (const std::invalid_argument& e) {
    return e.what();
  }
  return "no error";
}

const std::string kSynergyHeader =
    "kernel-name,size,num-iters,core-freq,memory-freq,kernel-time [s],run-time [s],mean-energy [J]\n";

TEST(KernelSweeps, SynergyRowsUnsortedAndFloatIntegers) {
  const std::string text = kSynergyHeader +
                           "K,8,1,1530,877,0.2,0.21,30\n"
                           "K,8,1,472.00000000,877.00000000,0.5,0.51,20\r\n"
                           "L,8,1,1000,877,1.0,1.1,50\n";
  auto ks = parse_synergy_csv(text, "s.csv");
  ASSERT_EQ(ks.size(), 2u);
  EXPECT_EQ(ks[0].kernel, "K");
  EXPECT_EQ(ks[0].dataset, "synergy");
  EXPECT_EQ(ks[0].gpu, "v100");
  ASSERT_EQ(ks[0].samples.size(), 2u);
  EXPECT_EQ(ks[0].samples[0].sm_mhz, 472);  // sorted by clock
  EXPECT_EQ(ks[0].samples[0].mem_mhz, 877);
  EXPECT_DOUBLE_EQ(ks[0].samples[0].time_s, 0.5);
  EXPECT_DOUBLE_EQ(ks[0].samples[0].energy_j, 20);
  EXPECT_TRUE(ks[0].counters.empty());
}

TEST(KernelSweeps, SynergyErrorsNameFileLineAndColumn) {
  EXPECT_THAT(error_of([] { parse_synergy_csv("", "s.csv"); }), HasSubstr("s.csv: empty file"));
  EXPECT_THAT(error_of([] { parse_synergy_csv("kernel-name,core-freq\nK,1\n", "s.csv"); }),
              HasSubstr("s.csv:1: missing column 'memory-freq'"));
  EXPECT_THAT(error_of([&] { parse_synergy_csv(kSynergyHeader + "K,8,1,1530,877,0.2\n", "s.csv"); }),
              HasSubstr("s.csv:2: expected 8 columns, got 6"));
  EXPECT_THAT(error_of([&] { parse_synergy_csv(kSynergyHeader + "K,8,1,15x0,877,0.2,0.2,3\n", "s.csv"); }),
              HasSubstr("s.csv:2: column 'core-freq' is not a number: '15x0'"));
  EXPECT_THAT(error_of([&] { parse_synergy_csv(kSynergyHeader + "K,8,1,1530.5,877,0.2,0.2,3\n", "s.csv"); }),
              HasSubstr("whole positive number of MHz"));
  EXPECT_THAT(error_of([&] { parse_synergy_csv(kSynergyHeader + "K,8,1,1530,877,0,0.2,3\n", "s.csv"); }),
              HasSubstr("s.csv:2: column 'kernel-time [s]' must be > 0"));
  EXPECT_THAT(error_of([&] {
                parse_synergy_csv(kSynergyHeader + "K,8,1,1530,877,0.2,0.2,3\nK,8,1,1530,877,0.3,0.3,3\n", "s.csv");
              }),
              HasSubstr("kernel 'K' has two samples at SM 1530 MHz"));
  EXPECT_THROW(read_text_file("/nonexistent/k.csv"), std::runtime_error);
}

const std::string kNvHeader =
    "DRAMA,FP16A,FP32A,FP64A,SMACT,SMOCC,TENSO,argNo,average_power,benchmark,core_frequency,kernel,memory_frequency,time\n";

TEST(KernelSweeps, NvDvfsUnitsAndCounters) {
  const std::string text = kNvHeader +
                           "0.7,0,0.4,0,0.97,0.83,0,input000,150,BlackScholes,1087,BlackScholesGPU,877,0.9\n"
                           "0.6,0,0.3,0,0.96,0.80,0,input000,100,BlackScholes,405,BlackScholesGPU,877,2.0\n"
                           "0.1,0,0.9,0,0.99,0.50,0,input001,200,BlackScholes,1087,BlackScholesGPU,877,0.5\n";
  auto ks = parse_nvdvfs_profile_csv(text, "n.csv", "v100");
  ASSERT_EQ(ks.size(), 2u);
  EXPECT_EQ(ks[0].kernel, "BlackScholes/input000");
  ASSERT_EQ(ks[0].samples.size(), 2u);
  EXPECT_EQ(ks[0].samples[0].sm_mhz, 405);              // "1087" < "405" as text in the file; sorted here
  EXPECT_DOUBLE_EQ(ks[0].samples[0].time_s, 2.0e-3);    // ms -> s
  EXPECT_DOUBLE_EQ(ks[0].samples[0].energy_j, 0.2);     // 100 W × 2 ms
  ASSERT_EQ(ks[0].counters.size(), 2u);
  EXPECT_DOUBLE_EQ(ks[0].counters[0].dram_active, 0.6);  // counters follow their sample
  EXPECT_DOUBLE_EQ(ks[0].counters[1].fp32_active, 0.4);
  // The caveat: the V100's 405 MHz setting was not reached.
  const KernelSweep kept = drop_unreached_clocks(ks[0]);
  ASSERT_EQ(kept.samples.size(), 1u);
  EXPECT_EQ(kept.samples[0].sm_mhz, 1087);
  EXPECT_DOUBLE_EQ(kept.counters[0].dram_active, 0.7);

  // A row without counters (one V100 shmembench row): the sample is kept, its counters marked not measured.
  auto none = parse_nvdvfs_profile_csv(
      kNvHeader + ",,,,,,,input005,53.9,shmembench,600,benchmark_float,877,0.52\n", "n.csv", "v100");
  ASSERT_EQ(none[0].counters.size(), 1u);
  EXPECT_FALSE(none[0].counters[0].measured);
  EXPECT_THAT(error_of([&] {
                parse_nvdvfs_profile_csv(
                    kNvHeader + ",0,0.4,0,0.97,0.83,0,input000,150,BlackScholes,1087,BlackScholesGPU,877,0.9\n",
                    "n.csv", "v100");
              }),
              HasSubstr("n.csv:2: column 'DRAMA' is not a number: ''"));
  EXPECT_THAT(error_of([&] {
                parse_nvdvfs_profile_csv(
                    kNvHeader + "1.7,0,0.4,0,0.97,0.83,0,input000,150,BlackScholes,1087,BlackScholesGPU,877,0.9\n",
                    "n.csv", "v100");
              }),
              HasSubstr("n.csv:2: column 'DRAMA' is an activity ratio in [0, 1], got 1.7"));
}

TEST(KernelSweeps, GpuPtxBlocksAndDuplicateNames) {
  const std::string text =
      "gemm\n810,595,2.0,80,160\n3505,595,1.5,90,135\nstencil2d\n810,595,1,50,50\nstencil2d\n810,595,2,50,100\n";
  auto ks = parse_gpuptx_csv(text, "g.csv");
  ASSERT_EQ(ks.size(), 3u);
  EXPECT_EQ(ks[0].kernel, "gemm");
  EXPECT_EQ(ks[2].kernel, "stencil2d#2");
  ASSERT_EQ(ks[0].samples.size(), 2u);
  EXPECT_EQ(at_memory_clock(ks[0], 3505).size(), 1u);
  EXPECT_DOUBLE_EQ(at_memory_clock(ks[0], 3505)[0].energy_j, 135);
  EXPECT_THAT(error_of([] { parse_gpuptx_csv("810,595,2.0,80,160\n", "g.csv"); }),
              HasSubstr("g.csv:1: a data line before any kernel name"));
  EXPECT_THAT(error_of([] { parse_gpuptx_csv("k\n810,595,2.0\n", "g.csv"); }), HasSubstr("g.csv:2: expected a kernel name or 5 columns"));
  EXPECT_THAT(error_of([] { parse_gpuptx_csv("k\nj\n810,595,1,1,1\n", "g.csv"); }), HasSubstr("kernel 'k' has no data lines"));
}

TEST(KernelSweeps, KernelTunerCache) {
  const std::string text = R"({"kernel_name": "fp32_kernel", "cache": {
      "a": {"nvml_gr_clock": 1410, "time": 196.4, "nvml_power": 153.6},
      "b": {"nvml_gr_clock": 210, "time": 1300.0, "nvml_power": 41.4}}})";
  const KernelSweep k = parse_kernel_tuner_cache(text, "c.json");
  EXPECT_EQ(k.kernel, "fp32_kernel");
  ASSERT_EQ(k.samples.size(), 2u);
  EXPECT_EQ(k.samples[0].sm_mhz, 210);
  EXPECT_DOUBLE_EQ(k.samples[1].time_s, 0.1964);
  EXPECT_NEAR(k.samples[1].energy_j, 153.6 * 0.1964, 1e-12);
  EXPECT_THAT(error_of([] { parse_kernel_tuner_cache("[1]", "c.json"); }), HasSubstr("c.json: not a JSON object"));
  EXPECT_THAT(error_of([] { parse_kernel_tuner_cache(R"({"cache": {"a": {"nvml_gr_clock": 1410, "time": 1}}})", "c.json"); }),
              HasSubstr("c.json: cache['a']: 'nvml_power' missing or not a number > 0"));
}

TEST(KernelSweeps, SharedFolderAsTheReadmeDescribes) {
  const std::string dir = std::string(GEARSHIFT_SHARED_DIR) + "/data/kernel_sweeps";
  if (!std::filesystem::exists(dir)) GTEST_SKIP() << "shared kernel sweeps not found under " << dir;
  const auto all = read_kernel_sweeps(dir);
  int synergy_real = 0, synergy_micro = 0, nv_v100 = 0, nv_rtx = 0, ptx = 0, kt = 0;
  for (const auto& k : all) {
    if (k.dataset == "synergy") {
      (k.suite == "real" ? synergy_real : synergy_micro)++;
      EXPECT_EQ(k.samples.size(), 141u) << k.kernel;  // 187 clocks, the 46 below 480 MHz dropped
      EXPECT_EQ(k.samples.front().sm_mhz, 480);
    }
    if (k.dataset == "nv-dvfs") {
      (k.gpu == "v100" ? nv_v100 : nv_rtx)++;
      EXPECT_EQ(k.samples.size(), k.gpu == "v100" ? 9u : 10u) << k.kernel;  // V100: 405 MHz dropped
      EXPECT_EQ(k.counters.size(), k.samples.size());
    }
    if (k.dataset == "gpuptx") {
      ++ptx;
      EXPECT_EQ(k.samples.size(), 32u) << k.kernel;
    }
    if (k.dataset == "kernel-tuner") {
      ++kt;
      EXPECT_EQ(k.samples.size(), 81u);
    }
  }
  EXPECT_EQ(synergy_real, 26);
  EXPECT_EQ(synergy_micro, 87);
  EXPECT_EQ(nv_v100, 158);  // 20 real + 138 microbenchmark configurations
  EXPECT_EQ(nv_rtx, 158);
  EXPECT_EQ(ptx, 165);      // 140 microbenchmarks + 25 application blocks
  EXPECT_EQ(kt, 1);
}

}  // namespace
}  // namespace gearshift::model
