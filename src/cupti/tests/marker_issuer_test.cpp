// The CUDA side of stream markers against stand-in driver functions: where the marker is written, what is
// skipped (captures, failed launches), what turns markers off; and reading a launch's stream from CUPTI's
// callback parameters.
#include "cupti/marker_issuer.hpp"

#include <gtest/gtest.h>

#include <vector>

#include "cupti/callback_handler.hpp"

namespace gearshift::cupti {
namespace {

// The stand-in driver's state (the driver functions are plain function pointers: no captures). Its "GPU"
// writes the marker's value at once, through the registered page's device pointer (here: the same address).
struct FakeDriver {
  CUresult register_result = CUDA_SUCCESS, write_result = CUDA_SUCCESS, exchange_result = CUDA_SUCCESS;
  CUstreamCaptureStatus capture = CU_STREAM_CAPTURE_STATUS_NONE;
  void* registered = nullptr;
  int registrations = 0;
  int mode_exchanges = 0;
  bool write_now = true;
  std::vector<std::pair<CUstream, cuuint64_t>> writes;
};
FakeDriver* g_fake = nullptr;

CudaDriver fake_driver() {
  CudaDriver d;
  d.stream_is_capturing = [](CUstream, CUstreamCaptureStatus* s) {
    *s = g_fake->capture;
    return CUDA_SUCCESS;
  };
  d.stream_write_value64 = [](CUstream s, CUdeviceptr p, cuuint64_t v, unsigned) {
    if (g_fake->write_result != CUDA_SUCCESS) return g_fake->write_result;
    EXPECT_EQ(p, reinterpret_cast<CUdeviceptr>(g_fake->registered));
    g_fake->writes.emplace_back(s, v);
    if (g_fake->write_now) *reinterpret_cast<std::uint64_t*>(p) = v;
    return CUDA_SUCCESS;
  };
  d.mem_host_register = [](void* p, size_t bytes, unsigned flags) {
    ++g_fake->registrations;
    EXPECT_TRUE(flags & CU_MEMHOSTREGISTER_DEVICEMAP);
    EXPECT_GE(bytes, sizeof(std::uint64_t));
    if (g_fake->register_result != CUDA_SUCCESS) return g_fake->register_result;
    g_fake->registered = p;
    return CUDA_SUCCESS;
  };
  d.mem_host_get_device_pointer = [](CUdeviceptr* dp, void* p, unsigned) {
    *dp = reinterpret_cast<CUdeviceptr>(p);
    return CUDA_SUCCESS;
  };
  d.thread_exchange_stream_capture_mode = [](CUstreamCaptureMode*) {
    ++g_fake->mode_exchanges;
    return g_fake->exchange_result;
  };
  d.get_error_name = [](CUresult, const char** s) {
    *s = "CUDA_ERROR_NOT_SUPPORTED";
    return CUDA_SUCCESS;
  };
  return d;
}

class MarkerIssuerTest : public ::testing::Test {
 protected:
  void SetUp() override { g_fake = &fake; }
  void TearDown() override { g_fake = nullptr; }
  FakeDriver fake;
};

TEST_F(MarkerIssuerTest, WritesTheClaimedMarkerOnTheLaunchStream) {
  StreamMarkers m;
  m.set_period_ns(1'000'000);
  MarkerIssuer issuer(fake_driver(), m);
  auto* stream = reinterpret_cast<CUstream>(0x1234);
  ASSERT_TRUE(m.claim(0, 77));
  issuer.after_launch(stream, false, true);
  ASSERT_EQ(fake.writes.size(), 1u);
  EXPECT_EQ(fake.writes[0].first, stream);
  EXPECT_EQ(fake.writes[0].second, 1u);
  EXPECT_EQ(fake.registrations, 1);
  EXPECT_EQ(fake.mode_exchanges, 2);  // relaxed for the registration, then restored
  auto seen = m.poll(500'000);  // the stand-in GPU wrote it at once
  ASSERT_TRUE(seen);
  EXPECT_EQ(seen->correlation, 77u);
  // The second marker: the same word, the next number; a _ptsz launch on stream 0 writes on the per-thread stream.
  ASSERT_TRUE(m.claim(1'500'000, 78));
  issuer.after_launch(nullptr, true, true);
  ASSERT_EQ(fake.writes.size(), 2u);
  EXPECT_EQ(fake.writes[1].first, CU_STREAM_PER_THREAD);
  EXPECT_EQ(fake.writes[1].second, 2u);
  EXPECT_EQ(fake.registrations, 1);
  EXPECT_TRUE(m.poll(1'600'000));
  EXPECT_EQ(issuer.problem(), "");
  // A context is about to go: markers stop for good, quietly.
  issuer.context_destroying();
  m.set_period_ns(1'000'000);
  EXPECT_FALSE(m.claim(10'000'000, 79));
  EXPECT_EQ(issuer.problem(), "");
}

TEST_F(MarkerIssuerTest, SkipsCapturingStreamsAndFailedLaunches) {
  StreamMarkers m;
  m.set_period_ns(1'000'000);
  MarkerIssuer issuer(fake_driver(), m);
  fake.capture = CU_STREAM_CAPTURE_STATUS_ACTIVE;
  ASSERT_TRUE(m.claim(0, 1));
  issuer.after_launch(nullptr, false, true);
  EXPECT_EQ(fake.registrations, 0);  // not even registered during the user's capture
  fake.capture = CU_STREAM_CAPTURE_STATUS_NONE;
  ASSERT_TRUE(m.claim(2'000'000, 2));
  issuer.after_launch(nullptr, false, /*launched=*/false);
  fake.exchange_result = CUDA_ERROR_NOT_SUPPORTED;  // cannot leave global capture mode: no registration now
  ASSERT_TRUE(m.claim(4'000'000, 3));
  issuer.after_launch(nullptr, false, true);
  EXPECT_EQ(fake.registrations, 0);
  EXPECT_TRUE(fake.writes.empty());
  EXPECT_EQ(m.stats().abandoned, 3u);
  EXPECT_TRUE(m.claim(6'000'000, 4));  // still on
  EXPECT_EQ(issuer.problem(), "");
}

TEST_F(MarkerIssuerTest, ARefusedWriteTurnsMarkersOffForGood) {
  StreamMarkers m;
  m.set_period_ns(1'000'000);
  MarkerIssuer issuer(fake_driver(), m);
  fake.write_result = CUDA_ERROR_NOT_SUPPORTED;
  ASSERT_TRUE(m.claim(0, 1));
  issuer.after_launch(nullptr, false, true);
  EXPECT_EQ(issuer.problem(), "cuStreamWriteValue64 failed: CUDA_ERROR_NOT_SUPPORTED (code 801)");
  m.set_period_ns(1'000'000);  // the runtime asks again: still off
  EXPECT_FALSE(m.claim(10'000'000, 2));
}

TEST_F(MarkerIssuerTest, ARefusedRegistrationTurnsMarkersOff) {
  StreamMarkers m;
  m.set_period_ns(1'000'000);
  MarkerIssuer issuer(fake_driver(), m);
  fake.register_result = CUDA_ERROR_OUT_OF_MEMORY;
  ASSERT_TRUE(m.claim(0, 1));
  issuer.after_launch(nullptr, false, true);
  EXPECT_TRUE(fake.writes.empty());
  EXPECT_TRUE(issuer.problem().starts_with("cuMemHostRegister failed: ")) << issuer.problem();
  EXPECT_FALSE(m.claim(10'000'000, 2));
}

TEST(LaunchStream, ReadsTheStreamOfEveryLaunchKind) {
  auto* s = reinterpret_cast<CUstream>(0x99);
  CUpti_CallbackData d{};
  CUstream got = nullptr;
  bool per_thread = true;
  cuLaunchKernel_params k{};
  k.hStream = s;
  d.functionParams = &k;
  ASSERT_TRUE(launch_stream(CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel, &d, got, per_thread));
  EXPECT_EQ(got, s);
  EXPECT_FALSE(per_thread);
  ASSERT_TRUE(launch_stream(CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel_ptsz, &d, got, per_thread));
  EXPECT_TRUE(per_thread);
  CUlaunchConfig cfg{};
  cfg.hStream = s;
  cuLaunchKernelEx_params ex{};
  ex.config = &cfg;
  d.functionParams = &ex;
  got = nullptr;
  ASSERT_TRUE(launch_stream(CUPTI_DRIVER_TRACE_CBID_cuLaunchKernelEx, &d, got, per_thread));
  EXPECT_EQ(got, s);
  ex.config = nullptr;
  EXPECT_FALSE(launch_stream(CUPTI_DRIVER_TRACE_CBID_cuLaunchKernelEx, &d, got, per_thread));
  cuGraphLaunch_params g{};
  g.hStream = s;
  d.functionParams = &g;
  got = nullptr;
  ASSERT_TRUE(launch_stream(CUPTI_DRIVER_TRACE_CBID_cuGraphLaunch_ptsz, &d, got, per_thread));
  EXPECT_EQ(got, s);
  EXPECT_TRUE(per_thread);
  EXPECT_FALSE(launch_stream(CUPTI_DRIVER_TRACE_CBID_cuMemAlloc, &d, got, per_thread));
  d.functionParams = nullptr;
  EXPECT_FALSE(launch_stream(CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel, &d, got, per_thread));
}

}  // namespace
}  // namespace gearshift::cupti
