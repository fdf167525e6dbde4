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
