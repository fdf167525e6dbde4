// The sampler against the simulated GPU (constant power): energies must equal power × the window's own
// duration. No assertion here is on how long anything took.
#include <gtest/gtest.h>

#include <cstdlib>
#include <mutex>
#include <thread>

#include "monitor/sampler.hpp"

namespace gearshift::monitor {
namespace {

class SamplerSim : public ::testing::Test {
 protected:
  void SetUp() override {
    unsetenv("GEARSHIFT_SIMGPU_STATE");
    unsetenv("GEARSHIFT_SIMGPU_FAULT");
    unsetenv("GEARSHIFT_SIMGPU_SPEC");
    setenv("GEARSHIFT_SIMGPU_COUNT", "2", 1);
    setenv("GEARSHIFT_SIMGPU_POWER_W", "250", 1);
  }
  std::vector<gpu::Device> devices() {
    auto n = gpu::Nvml::open(GEARSHIFT_SIMGPU_PATH);
    EXPECT_TRUE(n.ok());
    nvml_ = n.value();
    return nvml_->devices().value();
  }
  SamplerOptions options() {
    SamplerOptions o;
    o.interval = std::chrono::milliseconds(20);
    o.on_note = [this](const std::string& s) {
      std::lock_guard<std::mutex> lk(mu_);
      notes_.push_back(s);
    };
    return o;
  }
  std::shared_ptr<const gpu::Nvml> nvml_;
  std::mutex mu_;
  std::vector<std::string> notes_;
};

void sleep_ms(int ms) { std::this_thread::sleep_for(std::chrono::milliseconds(ms)); }

TEST_F(SamplerSim, CounterWindowMatchesPowerTimesDuration) {
  Sampler s(devices(), options());
  s.begin("w");
  sleep_ms(350);
  WindowResult r = s.end("w");
  ASSERT_EQ(r.gpus.size(), 2u);
  for (const auto& g : r.gpus) {
    EXPECT_EQ(g.method, "counter");
    EXPECT_FALSE(g.approximate);
    EXPECT_NEAR(g.energy_j, 250.0 * to_s(r.time_ns), 0.01 * 250.0 * to_s(r.time_ns));
    EXPECT_NEAR(g.avg_power_w, 250.0, 2.5);
    EXPECT_DOUBLE_EQ(g.peak_power_w, 250.0);
    EXPECT_EQ(g.time_ns, r.time_ns);
    EXPECT_EQ(r.time_ns, r.end_ns - r.begin_ns);  // measured: whole ns of the steady clock
    EXPECT_GT(r.time_ns, 0);
  }
  EXPECT_EQ(r.gpus[1].gpu, 1u);
}

TEST_F(SamplerSim, ShortWindowUsesPowerAndIsApproximate) {
  Sampler s(devices(), options());
  sleep_ms(50);
  s.begin("short");
  WindowResult r = s.end("short");  // far below the 100 ms counter period
  for (const auto& g : r.gpus) {
    EXPECT_EQ(g.method, "power");
    EXPECT_TRUE(g.approximate);
    EXPECT_NEAR(g.energy_j, 250.0 * to_s(r.time_ns), 1e-6 + 1e-3 * 250.0 * to_s(r.time_ns));
  }
}

TEST_F(SamplerSim, NestedAndOverlappingWindows) {
  Sampler s(devices(), options());
  s.begin("outer");
  s.begin("inner");
  sleep_ms(150);
  s.begin("overlap");
  WindowResult inner = s.end("inner");
  sleep_ms(150);
  WindowResult overlap = s.end("overlap");
  WindowResult outer = s.end("outer");
  EXPECT_LT(to_s(inner.time_ns), to_s(outer.time_ns));
  EXPECT_GT(inner.gpus[0].energy_j, 0.0);
  EXPECT_LT(inner.gpus[0].energy_j, outer.gpus[0].energy_j);
  EXPECT_NEAR(outer.gpus[0].energy_j, 250.0 * to_s(outer.time_ns), 0.01 * 250.0 * to_s(outer.time_ns));
  EXPECT_NEAR(overlap.gpus[0].energy_j, 250.0 * to_s(overlap.time_ns), 0.01 * 250.0 * to_s(overlap.time_ns) + 0.5);
  EXPECT_THROW(s.end("outer"), std::invalid_argument);
  s.begin("again");
  EXPECT_THROW(s.begin("again"), std::invalid_argument);
  s.end("again");
}

TEST_F(SamplerSim, NoCounterFallsBackToPower) {
  setenv("GEARSHIFT_SIMGPU_FAULT", "no-energy-counter", 1);
  setenv("GEARSHIFT_SIMGPU_COUNT", "1", 1);
  Sampler s(devices(), options());
  s.begin("w");
  sleep_ms(250);
  WindowResult r = s.end("w");
  EXPECT_EQ(r.gpus[0].method, "power");
  EXPECT_TRUE(r.gpus[0].approximate);
  EXPECT_NEAR(r.gpus[0].energy_j, 250.0 * to_s(r.time_ns), 0.01 * 250.0 * to_s(r.time_ns));
  std::lock_guard<std::mutex> lk(mu_);
  ASSERT_EQ(notes_.size(), 1u);
  EXPECT_NE(notes_[0].find("no usable energy counter"), std::string::npos) << notes_[0];
}

TEST_F(SamplerSim, CounterWrapIsCarriedThrough) {
  setenv("GEARSHIFT_SIMGPU_FAULT", "counter-wrap", 1);
  setenv("GEARSHIFT_SIMGPU_COUNT", "1", 1);
  setenv("GEARSHIFT_SIMGPU_POWER_W", "2000", 1);  // 500 J below the wrap: wraps 0.25 s in
  Sampler s(devices(), options());
  s.begin("w");
  sleep_ms(500);
  WindowResult r = s.end("w");
  EXPECT_EQ(r.gpus[0].method, "counter");
  EXPECT_NEAR(r.gpus[0].energy_j, 2000.0 * to_s(r.time_ns), 0.01 * 2000.0 * to_s(r.time_ns));
  std::lock_guard<std::mutex> lk(mu_);
  ASSERT_EQ(notes_.size(), 1u);
  EXPECT_NE(notes_[0].find("wrapped"), std::string::npos);
}

TEST_F(SamplerSim, LostGpuEndsWindowWithMark) {
  setenv("GEARSHIFT_SIMGPU_FAULT", "gpu-lost-after=0.2", 1);
  setenv("GEARSHIFT_SIMGPU_COUNT", "1", 1);
  Sampler s(devices(), options());
  s.begin("w");
  sleep_ms(400);
  WindowResult r = s.end("w");
  EXPECT_TRUE(r.gpus[0].lost);
  EXPECT_TRUE(r.gpus[0].approximate);
  // Energy only up to the loss: less than the whole window's.
  EXPECT_LT(r.gpus[0].energy_j, 250.0 * to_s(r.time_ns));
  EXPECT_GT(r.gpus[0].energy_j, 0.0);
  std::lock_guard<std::mutex> lk(mu_);
  ASSERT_EQ(notes_.size(), 1u);
  EXPECT_NE(notes_[0].find("GPU 0 lost"), std::string::npos) << notes_[0];
}

TEST_F(SamplerSim, LatestSamplesCarryEveryField) {
  std::mutex m;
  std::vector<GpuSample> seen;
  auto o = options();
  o.on_sample = [&](const GpuSample& g) {
    std::lock_guard<std::mutex> lk(m);
    seen.push_back(g);
  };
  {
    Sampler s(devices(), o);
    s.begin("w");
    sleep_ms(100);
    s.end("w");
    auto l = s.latest();
    ASSERT_EQ(l.size(), 2u);
    EXPECT_EQ(l[0].sm_clock_mhz.value(), 1980u);
    EXPECT_EQ(l[0].mem_clock_mhz.value(), 3201u);
    EXPECT_DOUBLE_EQ(l[0].power_w.value(), 250.0);
    EXPECT_TRUE(l[0].energy_counter_mj.has_value());
    EXPECT_TRUE(l[0].temperature_c.has_value());
    EXPECT_EQ(s.devices()[1].uuid, "GPU-5a1e0000-0000-4000-8000-000000000001");
  }
  std::lock_guard<std::mutex> lk(m);
  EXPECT_GE(seen.size(), 2u);
}

}  // namespace
}  // namespace gearshift::monitor
