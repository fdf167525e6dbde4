// The driver-API launch callback: the hot path. Maps the callback id to the launch API and records the
// launch's correlation id in the LaunchTable on API entry. No allocation, no lock, no system call.
#pragma once

#include <cupti.h>

#include <array>

#include "cupti/launch_queue.hpp"
#include "cupti/launch_table.hpp"

namespace gearshift::cupti {

// The driver callbacks the tracer enables (launches of kernels and graphs, default and per-thread streams).
inline constexpr std::array<CUpti_CallbackId, 8> kLaunchCallbacks = {
    CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel,           CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel_ptsz,
    CUPTI_DRIVER_TRACE_CBID_cuLaunchKernelEx,         CUPTI_DRIVER_TRACE_CBID_cuLaunchKernelEx_ptsz,
    CUPTI_DRIVER_TRACE_CBID_cuLaunchCooperativeKernel, CUPTI_DRIVER_TRACE_CBID_cuLaunchCooperativeKernel_ptsz,
    CUPTI_DRIVER_TRACE_CBID_cuGraphLaunch,            CUPTI_DRIVER_TRACE_CBID_cuGraphLaunch_ptsz,
};

// Synchronizations that wait for every kernel launched before them (of the context, or of the stream: in a
// one-stream job the same): their return tells the runtime that the GPU got that far. Event synchronizes
// are left out (they wait only for work before the event's record).
inline constexpr std::array<CUpti_CallbackId, 3> kSyncCallbacks = {
    CUPTI_DRIVER_TRACE_CBID_cuCtxSynchronize,
    CUPTI_DRIVER_TRACE_CBID_cuStreamSynchronize,
    CUPTI_DRIVER_TRACE_CBID_cuStreamSynchronize_ptsz,
};

constexpr bool is_sync_api(CUpti_CallbackId cbid) noexcept {
  return cbid == CUPTI_DRIVER_TRACE_CBID_cuCtxSynchronize || cbid == CUPTI_DRIVER_TRACE_CBID_cuStreamSynchronize ||
         cbid == CUPTI_DRIVER_TRACE_CBID_cuStreamSynchronize_ptsz;
}

constexpr LaunchApi launch_api_of(CUpti_CallbackId cbid) noexcept {
  switch (cbid) {
    case CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel:
    case CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel_ptsz: return LaunchApi::kernel;
    case CUPTI_DRIVER_TRACE_CBID_cuLaunchKernelEx:
    case CUPTI_DRIVER_TRACE_CBID_cuLaunchKernelEx_ptsz: return LaunchApi::kernel_ex;
    case CUPTI_DRIVER_TRACE_CBID_cuLaunchCooperativeKernel:
    case CUPTI_DRIVER_TRACE_CBID_cuLaunchCooperativeKernel_ptsz: return LaunchApi::cooperative_kernel;
    case CUPTI_DRIVER_TRACE_CBID_cuGraphLaunch:
    case CUPTI_DRIVER_TRACE_CBID_cuGraphLaunch_ptsz: return LaunchApi::graph;
    default: return LaunchApi::unknown;
  }
}

// Called by CUPTI's callback trampoline for the driver domain. Cannot throw (no exception can cross into
// CUPTI): everything it does is noexcept. On a launch's API entry it records the launch in `table` and fills
// `out` (for the runtime feed), returning true. `now_ns` reads the CUPTI clock (cuptiGetTimestamp), the clock
// of the activity records too, so that each op can be placed in the CPU-side step that launched it; the
// caller passes the clock it already holds (no global lookup on the hot path).
template <typename NowNs>
inline bool on_driver_api(LaunchTable& table, CUpti_CallbackId cbid, const CUpti_CallbackData* data, NowNs&& now_ns,
                          LaunchEvent& out) noexcept {
  if (data == nullptr || data->callbackSite != CUPTI_API_ENTER) return false;
  LaunchApi api = launch_api_of(cbid);
  if (api == LaunchApi::unknown) return false;
  out.correlation = data->correlationId;
  out.api = api;
  out.cpu_ns = now_ns();
  out.symbol = api == LaunchApi::graph ? nullptr : data->symbolName;
  table.record(out.correlation, api, out.cpu_ns);
  return true;
}

// A synchronize's entry and exit (cbid in kSyncCallbacks): the entry time is kept in CUPTI's per-call
// correlationData; on a successful return fills `out` (cpu_ns = entry, sync_exit_ns = return) and returns true.
template <typename NowNs>
inline bool on_sync_api(CUpti_CallbackId cbid, const CUpti_CallbackData* data, NowNs&& now_ns,
                        LaunchEvent& out) noexcept {
  if (data == nullptr || !is_sync_api(cbid) || data->correlationData == nullptr) return false;
  if (data->callbackSite == CUPTI_API_ENTER) {
    *data->correlationData = static_cast<std::uint64_t>(now_ns());
    return false;
  }
  const auto* rc = static_cast<const CUresult*>(data->functionReturnValue);
  if (rc != nullptr && *rc != CUDA_SUCCESS) return false;  // it did not wait for the GPU
  out = LaunchEvent{};
  out.correlation = data->correlationId;
  out.cpu_ns = static_cast<std::int64_t>(*data->correlationData);
  out.sync_exit_ns = now_ns();
  return true;
}

// Without a clock (launch times unknown): tests and the table-only benchmark.
inline bool on_driver_api(LaunchTable& table, CUpti_CallbackId cbid, const CUpti_CallbackData* data) noexcept {
  LaunchEvent unused;
  return on_driver_api(table, cbid, data, [] { return std::int64_t{-1}; }, unused);
}

}  // namespace gearshift::cupti
