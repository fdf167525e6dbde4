#include "model/dvfs_model.hpp"

#include <gtest/gtest.h>

namespace gearshift::model {
namespace {

DvfsModel h200() { return DvfsModel(gpu::find_spec("h200")); }

TEST(DvfsModel, VoltageFlatBelowKneeLinearAbove) {
  auto m = h200();
  EXPECT_DOUBLE_EQ(m.voltage_ratio(345), 0.70);
  EXPECT_DOUBLE_EQ(m.voltage_ratio(1200), 0.70);
  EXPECT_DOUBLE_EQ(m.voltage_ratio(1980), 1.0);
  EXPECT_NEAR(m.voltage_ratio(1590), 0.85, 1e-12);  // halfway from knee 1200 to 1980
}

TEST(DvfsModel, IdlePowerInterpolatesTheMeasuredEnds) {
  auto m = h200();
  EXPECT_DOUBLE_EQ(m.idle_power_w(345), 78);
  EXPECT_DOUBLE_EQ(m.idle_power_w(1980), 122);
  EXPECT_NEAR(m.idle_power_w((345 + 1980) / 2), 100, 0.1);
}

TEST(DvfsModel, TimeFollowsTheSharesFormula) {
  auto m = h200();
  KernelCoefficients k{0.5, 0.3, 0.1, 0.1};  // low activity: never capped
  ClockPair ref{1980, 3201};
  auto p = m.predict(1000.0, ref, {990, 2201}, k);
  EXPECT_EQ(p.effective_sm_mhz, 990);
  EXPECT_NEAR(p.time_ns, 1000.0 * (0.5 * 2.0 + 0.3 * 3201.0 / 2201.0 + 0.2), 1e-9);
  EXPECT_NEAR(p.energy_j, p.power_w * p.time_ns * 1e-9, 1e-15);
}

// A roofline kernel memory-bound at the reference (SM term 0.90, memory term 0.95 of t_ref; kink at 1876 MHz):
// lowering the SM clock is free only down to its kink; its local a, b read additively (a = 0) would call it
// free to any clock.
TEST(DvfsModel, RooflineKernelIsNotFreeToSlowPastItsKink) {
  auto m = h200();
  KernelCoefficients k{0.90, 0.95, 0.1, 0.1};  // low activity: never capped
  k.time_law = TimeLaw::roofline;
  const ClockPair ref{1980, 3201};
  EXPECT_NEAR(m.predict(1000.0, ref, ref, k).time_ns, 1000.0, 1e-9);
  EXPECT_NEAR(m.predict(1000.0, ref, {1905, 3201}, k).time_ns, 1000.0, 1e-9);  // above the kink: memory-bound
  EXPECT_NEAR(m.predict(1000.0, ref, {990, 3201}, k).time_ns, 1000.0 * (0.90 * 2.0 + 0.05), 1e-9);  // 1850 ns
  EXPECT_NEAR(m.predict(1000.0, ref, {1980, 2201}, k).time_ns, 1000.0 * (0.95 * 3201.0 / 2201.0 + 0.05), 1e-9);
  KernelCoefficients local{0.0, 0.95, 0.1, 0.1};  // the local law at ref
  EXPECT_NEAR(m.predict(1000.0, ref, {990, 3201}, local).time_ns, 1000.0, 1e-9);
}

TEST(DvfsModel, DenseGemmIsPowerCappedAtMaxClock) {
  auto m = h200();
  KernelCoefficients gemm = class_prior(KernelClass::gemm);
  int f = m.capped_sm_clock({1980, 3201}, gemm);
  // docs/design.md: GPT-3 XL on H200 at the 700 W cap ran at 1815-1935 MHz.
  EXPECT_GE(f, 1800);
  EXPECT_LT(f, 1980);
  auto p = m.predict(1000, {f, 3201}, {1980, 3201}, gemm);
  EXPECT_LE(p.power_w, 700.0);
  EXPECT_NEAR(p.time_ns, 1000, 1e-9);  // reference taken at the capped clock
  // An elementwise kernel is not capped.
  EXPECT_EQ(m.capped_sm_clock({1980, 3201}, class_prior(KernelClass::elementwise)), 1980);
}

TEST(DvfsModel, CappedClockIsTheHighestSupportedClockUnderTheCap) {
  // The bisection in capped_sm_clock against the plain walk down the supported clocks, for activities from
  // far below to far above a dense GEMM's (the error bars draw up to ×50) and every memory clock.
  const DvfsModel m(gpu::find_spec("h200"));
  const auto& clocks = m.spec().sm_clocks_mhz;
  for (double u : {0.01, 0.3, 1.0, 1.3, 2.0, 5.0, 50.0})
    for (int mem : m.spec().mem_clocks_mhz)
      for (int req : {clocks.front(), 990, 1875, 1980}) {
        KernelCoefficients k = class_prior(KernelClass::gemm);
        k.activity = u;
        int walk = clocks.front();
        for (int f : clocks)
          if (f <= req && m.idle_power_w(f) + m.dynamic_power_w({f, mem}, k) <= m.params().power_cap_w) walk = f;
        EXPECT_EQ(m.capped_sm_clock({req, mem}, k), walk) << u << " " << mem << " " << req;
      }
}

TEST(KernelClass, ClassifiesRealKernelNames) {
  using trace::OpKind;
  EXPECT_EQ(classify(OpKind::kernel, "nvjet_tst_128x256_64x4_1x2_h_bz_coopA_TNT"), KernelClass::gemm);
  EXPECT_EQ(classify(OpKind::kernel, "void pytorch_flash::flash_fwd_kernel<Flash_fwd_kernel_traits<64>>"),
            KernelClass::attention);
  EXPECT_EQ(classify(OpKind::kernel, "ncclDevKernel_AllReduce_Sum_f32_RING_LL(ncclDevKernelArgsStorage<4096ul>)"),
            KernelClass::communication);
  EXPECT_EQ(classify(OpKind::kernel, "void at::native::(anonymous namespace)::multi_tensor_apply_kernel<...FusedAdamMathFunctor"),
            KernelClass::optimizer);
  EXPECT_EQ(classify(OpKind::kernel, "void at::native::vectorized_layer_norm_kernel<c10::BFloat16, float>"),
            KernelClass::reduction_norm);
  EXPECT_EQ(classify(OpKind::memset, "Memset (Device)"), KernelClass::copy_memset);
  EXPECT_EQ(classify(OpKind::kernel, "void at::native::vectorized_elementwise_kernel<4, at::native::GeluCUDAKernelImpl"),
            KernelClass::elementwise);
}

}  // namespace
}  // namespace gearshift::model
