#include <gtest/gtest.h>

#include "cupti/callback_handler.hpp"

using namespace gearshift::cupti;

TEST(CallbackHandler, RecordsLaunchesOnEntryOnly) {
  LaunchTable t(1024);
  CUpti_CallbackData d{};
  d.callbackSite = CUPTI_API_ENTER;
  d.correlationId = 11;
  on_driver_api(t, CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel_ptsz, &d);
  d.correlationId = 12;
  on_driver_api(t, CUPTI_DRIVER_TRACE_CBID_cuGraphLaunch, &d);
  d.correlationId = 13;
  d.callbackSite = CUPTI_API_EXIT;
  on_driver_api(t, CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel, &d);
  d.callbackSite = CUPTI_API_ENTER;
  d.correlationId = 14;
  on_driver_api(t, CUPTI_DRIVER_TRACE_CBID_cuMemAlloc, &d);  // not a launch
  on_driver_api(t, CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel, nullptr);
  EXPECT_EQ(t.lookup(11), LaunchApi::kernel);
  EXPECT_EQ(t.lookup(12), LaunchApi::graph);
  EXPECT_EQ(t.lookup(13), LaunchApi::unknown);
  EXPECT_EQ(t.lookup(14), LaunchApi::unknown);
  EXPECT_EQ(t.total_launches(), 2u);
}

TEST(CallbackHandler, EveryEnabledCallbackIsALaunch) {
  for (CUpti_CallbackId id : kLaunchCallbacks) EXPECT_NE(launch_api_of(id), LaunchApi::unknown) << id;
  EXPECT_EQ(launch_api_of(CUPTI_DRIVER_TRACE_CBID_cuLaunchKernelEx_ptsz), LaunchApi::kernel_ex);
  EXPECT_EQ(launch_api_of(CUPTI_DRIVER_TRACE_CBID_cuLaunchCooperativeKernel), LaunchApi::cooperative_kernel);
}

// A synchronize: entry time kept in CUPTI's per-call slot, one event at a successful return; a failed one and
// other APIs give none; the driver's inside the runtime's is the same wait (one event, the runtime's).
TEST(CallbackHandler, SynchronizesGiveOneEventAtTheirReturn) {
  std::int64_t clock = 1000;
  auto now = [&] { return clock += 100; };
  auto call = [&](CUpti_CallbackDomain dom, CUpti_CallbackId id, CUpti_CallbackData& d, CUpti_ApiCallbackSite site,
                  LaunchEvent& e) {
    d.callbackSite = site;
    return on_sync_api(dom, id, &d, now, e);
  };
  uint64_t slot = 0;
  CUresult ok = CUDA_SUCCESS, failed = CUDA_ERROR_LAUNCH_FAILED;
  CUpti_CallbackData d{};
  d.correlationId = 5;
  d.correlationData = &slot;
  d.functionReturnValue = &ok;
  LaunchEvent e;
  EXPECT_FALSE(call(CUPTI_CB_DOMAIN_DRIVER_API, CUPTI_DRIVER_TRACE_CBID_cuStreamSynchronize, d, CUPTI_API_ENTER, e));
  EXPECT_TRUE(call(CUPTI_CB_DOMAIN_DRIVER_API, CUPTI_DRIVER_TRACE_CBID_cuStreamSynchronize, d, CUPTI_API_EXIT, e));
  EXPECT_EQ(e.correlation, 5u);
  EXPECT_EQ(e.cpu_ns, 1100);
  EXPECT_EQ(e.sync_exit_ns, 1200);
  EXPECT_EQ(e.symbol, nullptr);

  d.functionReturnValue = &failed;
  call(CUPTI_CB_DOMAIN_DRIVER_API, CUPTI_DRIVER_TRACE_CBID_cuCtxSynchronize_v2, d, CUPTI_API_ENTER, e);
  EXPECT_FALSE(call(CUPTI_CB_DOMAIN_DRIVER_API, CUPTI_DRIVER_TRACE_CBID_cuCtxSynchronize_v2, d, CUPTI_API_EXIT, e));
  d.functionReturnValue = &ok;
  EXPECT_FALSE(call(CUPTI_CB_DOMAIN_DRIVER_API, CUPTI_DRIVER_TRACE_CBID_cuEventSynchronize, d, CUPTI_API_EXIT, e));
  EXPECT_FALSE(call(CUPTI_CB_DOMAIN_DRIVER_API, CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel, d, CUPTI_API_EXIT, e));

  uint64_t rslot = 0;
  cudaError_t rok = cudaSuccess;
  CUpti_CallbackData r{};
  r.correlationId = 20;
  r.correlationData = &rslot;
  r.functionReturnValue = &rok;
  d.correlationId = 21;
  const auto rid = CUPTI_RUNTIME_TRACE_CBID_cudaDeviceSynchronize_v3020;
  EXPECT_FALSE(call(CUPTI_CB_DOMAIN_RUNTIME_API, rid, r, CUPTI_API_ENTER, e));
  EXPECT_FALSE(call(CUPTI_CB_DOMAIN_DRIVER_API, CUPTI_DRIVER_TRACE_CBID_cuCtxSynchronize_v2, d, CUPTI_API_ENTER, e));
  EXPECT_FALSE(call(CUPTI_CB_DOMAIN_DRIVER_API, CUPTI_DRIVER_TRACE_CBID_cuCtxSynchronize_v2, d, CUPTI_API_EXIT, e));
  EXPECT_TRUE(call(CUPTI_CB_DOMAIN_RUNTIME_API, rid, r, CUPTI_API_EXIT, e));
  EXPECT_EQ(e.correlation, 20u);
  // An exit whose entry was not seen (callbacks turned on during the call) is skipped.
  uint64_t fresh = 0;
  d.correlationData = &fresh;
  EXPECT_FALSE(call(CUPTI_CB_DOMAIN_DRIVER_API, CUPTI_DRIVER_TRACE_CBID_cuCtxSynchronize, d, CUPTI_API_EXIT, e));
  // Outside the runtime's again: the driver's own are reported.
  EXPECT_FALSE(call(CUPTI_CB_DOMAIN_DRIVER_API, CUPTI_DRIVER_TRACE_CBID_cuCtxSynchronize, d, CUPTI_API_ENTER, e));
  EXPECT_TRUE(call(CUPTI_CB_DOMAIN_DRIVER_API, CUPTI_DRIVER_TRACE_CBID_cuCtxSynchronize, d, CUPTI_API_EXIT, e));
  EXPECT_EQ(e.correlation, 21u);
}
