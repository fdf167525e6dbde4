// The NVML wrapper through the simulated GPU (the real dlopen path).
#include <gtest/gtest.h>

#include <chrono>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <thread>

#include "gpu/nvml.hpp"

namespace gearshift::gpu {
namespace {

class SimGpu : public ::testing::Test {
 protected:
  void SetUp() override {
    for (const char* v : {"GEARSHIFT_SIMGPU_SPEC", "GEARSHIFT_SIMGPU_COUNT", "GEARSHIFT_SIMGPU_POWER_W",
                          "GEARSHIFT_SIMGPU_STATE", "GEARSHIFT_SIMGPU_FAULT"}) {
      unsetenv(v);
    }
    setenv("GEARSHIFT_SIMGPU_POWER_W", "300", 1);
  }
  std::shared_ptr<const Nvml> open() {
    auto n = Nvml::open(GEARSHIFT_SIMGPU_PATH);
    EXPECT_TRUE(n.ok()) << (n.ok() ? "" : n.error().what());
    return n.ok() ? n.value() : nullptr;
  }
};

TEST_F(SimGpu, DeviceIdentityAndClocks) {
  setenv("GEARSHIFT_SIMGPU_COUNT", "2", 1);
  auto nvml = open();
  ASSERT_TRUE(nvml);
  ASSERT_EQ(nvml->device_count().value(), 2u);
  auto d1 = nvml->device(1).value();
  auto info = d1.info().value();
  EXPECT_EQ(info.index, 1u);
  EXPECT_EQ(info.name, "NVIDIA H200 SXM 141GB (simulated)");
  EXPECT_EQ(info.uuid, "GPU-5a1e0000-0000-4000-8000-000000000001");
  EXPECT_EQ(info.pci_bus_id, "00000000:28:00.0");
  EXPECT_FALSE(info.mig_enabled);
  auto mem = d1.supported_memory_clocks_mhz().value();
  EXPECT_EQ(mem, (std::vector<unsigned>{3201, 2201}));
  auto sm = d1.supported_sm_clocks_mhz(3201).value();
  ASSERT_EQ(sm.size(), 110u);
  EXPECT_EQ(sm.front(), 1980u);
  EXPECT_EQ(sm.back(), 345u);
  EXPECT_EQ(d1.supported_sm_clocks_mhz(1234).error().code, NvmlErrc::kNotFound);
  EXPECT_DOUBLE_EQ(d1.instant_power_w().value(), 300.0);
  EXPECT_DOUBLE_EQ(d1.average_power_w().value(), 300.0);
  EXPECT_DOUBLE_EQ(d1.power_limit_w().value(), 700.0);
  EXPECT_EQ(d1.sm_clock_mhz().value(), 1980u);
  EXPECT_EQ(d1.mem_clock_mhz().value(), 3201u);
  EXPECT_FALSE(d1.clocks_api_restricted().value());
  EXPECT_EQ(nvml->device(2).error().code, NvmlErrc::kInvalidArgument);
}

TEST_F(SimGpu, EnergyCounterStepsByWholePeriods) {
  auto nvml = open();
  ASSERT_TRUE(nvml);
  auto d = nvml->device(0).value();
  auto a = d.total_energy_mj().value();
  std::this_thread::sleep_for(std::chrono::milliseconds(250));
  auto b = d.total_energy_mj().value();
  // 300 W × 100 ms = 30 J per step; 250 ms holds 2 or 3 steps.
  EXPECT_EQ((b - a) % 30000, 0u);
  EXPECT_GE(b - a, 60000u);
  EXPECT_LE(b - a, 90000u);
}

TEST_F(SimGpu, LockedClocksAreSharedAndLogged) {
  std::string state = ::testing::TempDir() + "simgpu_state_test";
  std::remove(state.c_str());
  std::remove((state + ".clocklog").c_str());
  setenv("GEARSHIFT_SIMGPU_STATE", state.c_str(), 1);
  {
    auto nvml = open();
    ASSERT_TRUE(nvml);
    auto d = nvml->device(0).value();
    ASSERT_TRUE(d.set_locked_sm_clocks(1005, 1005).ok());
    ASSERT_TRUE(d.set_locked_mem_clocks(2201, 2201).ok());
    EXPECT_EQ(d.set_locked_sm_clocks(100, 200).error().code, NvmlErrc::kInvalidArgument);
  }
  {
    auto nvml = open();  // a fresh init reads the state file, as another process would
    auto d = nvml->device(0).value();
    EXPECT_EQ(d.sm_clock_mhz().value(), 1005u);
    EXPECT_EQ(d.mem_clock_mhz().value(), 2201u);
    ASSERT_TRUE(d.reset_locked_sm_clocks().ok());
    ASSERT_TRUE(d.reset_locked_mem_clocks().ok());
    EXPECT_EQ(d.sm_clock_mhz().value(), 1980u);
  }
  std::ifstream log(state + ".clocklog");
  std::vector<std::string> ops;
  std::string line;
  while (std::getline(log, line)) {
    std::istringstream in(line);
    long long t = 0;
    std::string gpu, op;
    unsigned lo = 0, hi = 0;
    in >> t >> gpu >> op >> lo >> hi;
    EXPECT_GT(t, 0);
    EXPECT_EQ(gpu, "gpu=0");
    ops.push_back(op + " " + std::to_string(lo) + " " + std::to_string(hi));
  }
  EXPECT_EQ(ops, (std::vector<std::string>{"set-sm 1005 1005", "set-mem 2201 2201", "reset-sm 0 0", "reset-mem 0 0"}));
}

TEST_F(SimGpu, FaultsBecomeTypedErrorsWithNvmlMessages) {
  setenv("GEARSHIFT_SIMGPU_FAULT", "no-permission,no-energy-counter", 1);
  auto nvml = open();
  ASSERT_TRUE(nvml);
  auto d = nvml->device(0).value();
  auto set = d.set_locked_sm_clocks(1005, 1005);
  ASSERT_FALSE(set.ok());
  EXPECT_EQ(set.error().code, NvmlErrc::kNoPermission);
  EXPECT_EQ(set.error().message, "Insufficient Permissions");
  EXPECT_EQ(set.error().function, "nvmlDeviceSetGpuLockedClocks");
  EXPECT_TRUE(d.clocks_api_restricted().value());
  EXPECT_EQ(d.total_energy_mj().error().code, NvmlErrc::kNotSupported);
}

TEST_F(SimGpu, LostGpu) {
  setenv("GEARSHIFT_SIMGPU_FAULT", "gpu-lost-after=0", 1);
  auto nvml = open();
  ASSERT_TRUE(nvml);
  auto d = nvml->device(0).value();
  auto e = d.total_energy_mj();
  ASSERT_FALSE(e.ok());
  EXPECT_EQ(e.error().code, NvmlErrc::kGpuLost);
  EXPECT_EQ(e.error().message, "GPU is lost");
}

TEST_F(SimGpu, CounterWrapIs32Bit) {
  setenv("GEARSHIFT_SIMGPU_FAULT", "counter-wrap", 1);
  auto nvml = open();
  auto v = nvml->device(0).value().total_energy_mj().value();
  EXPECT_LT(v, 1ULL << 32);
  EXPECT_GE(v + 500'000ULL, 1ULL << 32);  // starts 500 J below the wrap, 300 W: wraps within 1.7 s
}

TEST_F(SimGpu, BadConfigurationFailsInitWithReason) {
  setenv("GEARSHIFT_SIMGPU_SPEC", "h999", 1);
  auto n = Nvml::open(GEARSHIFT_SIMGPU_PATH);
  ASSERT_FALSE(n.ok());
  EXPECT_EQ(n.error().function, "nvmlInit_v2");
  EXPECT_NE(n.error().message.find("h999"), std::string::npos) << n.error().message;
  EXPECT_NE(n.error().message.find("h200"), std::string::npos) << n.error().message;
}

TEST(Nvml, MissingLibrary) {
  auto n = Nvml::open("/nonexistent/libnvidia-ml.so.1");
  ASSERT_FALSE(n.ok());
  EXPECT_EQ(n.error().code, NvmlErrc::kLibraryMissing);
  EXPECT_NE(n.error().message.find("/nonexistent"), std::string::npos);
}

TEST(Nvml, ClockEventReasonNames) {
  EXPECT_EQ(ClockEventReasons{0}.describe(), "none");
  EXPECT_EQ(ClockEventReasons{0x4 | 0x20}.describe(), "sw-power-cap,sw-thermal");
  EXPECT_EQ(ClockEventReasons{0x1 | (1ULL << 40)}.describe(), "idle,other");
}

}  // namespace
}  // namespace gearshift::gpu
