// The driver-API launch callback: the hot path. Maps the callback id to the launch API and records the
// launch's correlation id in the LaunchTable on API entry. No allocation, no lock, no system call.
#pragma once

#include <cupti.h>
#include <driver_types.h>

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
// are left out (they wait only for work before the event's record). Both API levels: PyTorch calls the
// runtime's (whose driver calls are internal and may differ between CUDA versions: CUDA 13's
// cudaDeviceSynchronize is cuCtxSynchronize_v2), other frameworks the driver's. A driver synchronize inside a
// runtime one is the same wait and is not reported twice.
inline constexpr std::array<CUpti_CallbackId, 4> kSyncDriverCallbacks = {
    CUPTI_DRIVER_TRACE_CBID_cuCtxSynchronize, CUPTI_DRIVER_TRACE_CBID_cuCtxSynchronize_v2,
    CUPTI_DRIVER_TRACE_CBID_cuStreamSynchronize, CUPTI_DRIVER_TRACE_CBID_cuStreamSynchronize_ptsz};
inline constexpr std::array<CUpti_CallbackId, 4> kSyncRuntimeCallbacks = {
    CUPTI_RUNTIME_TRACE_CBID_cudaDeviceSynchronize_v3020, CUPTI_RUNTIME_TRACE_CBID_cudaThreadSynchronize_v3020,
    CUPTI_RUNTIME_TRACE_CBID_cudaStreamSynchronize_v3020, CUPTI_RUNTIME_TRACE_CBID_cudaStreamSynchronize_ptsz_v7000};

constexpr bool is_sync_api(CUpti_CallbackDomain domain, CUpti_CallbackId cbid) noexcept {
  if (domain != CUPTI_CB_DOMAIN_RUNTIME_API && domain != CUPTI_CB_DOMAIN_DRIVER_API) return false;
  const auto& ids = domain == CUPTI_CB_DOMAIN_RUNTIME_API ? kSyncRuntimeCallbacks : kSyncDriverCallbacks;
  for (CUpti_CallbackId id : ids)
    if (id == cbid) return true;
  return false;
}

// Whether a synchronize callback (is_sync_api) waits for a whole device (context) or for one stream.
constexpr bool is_stream_sync(CUpti_CallbackDomain domain, CUpti_CallbackId cbid) noexcept {
  return domain == CUPTI_CB_DOMAIN_RUNTIME_API
             ? cbid == CUPTI_RUNTIME_TRACE_CBID_cudaStreamSynchronize_v3020 ||
                   cbid == CUPTI_RUNTIME_TRACE_CBID_cudaStreamSynchronize_ptsz_v7000
             : cbid == CUPTI_DRIVER_TRACE_CBID_cuStreamSynchronize || cbid == CUPTI_DRIVER_TRACE_CBID_cuStreamSynchronize_ptsz;
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

// Set while this thread is inside a runtime synchronize (whose driver synchronize is the same wait). Entry
// sets it, exit clears it (no nesting among synchronizes).
inline bool& inside_runtime_sync() noexcept {
  thread_local bool inside = false;
  return inside;
}

// Marks an entry time in CUPTI's per-call correlationData: an exit whose entry was not seen (callbacks
// enabled during the call) finds no mark and is skipped. CUPTI times are < 2^63 ns.
inline constexpr std::uint64_t kSyncEntryMark = std::uint64_t{1} << 63;

// A synchronize's entry and exit (a cbid of kSync*Callbacks in its domain): the entry time is kept in CUPTI's
// per-call correlationData; on a successful return fills `out` (cpu_ns = entry, sync_exit_ns = return) and
// returns true. A driver synchronize while this thread is inside a runtime one is skipped (the same wait).
template <typename NowNs>
inline bool on_sync_api(CUpti_CallbackDomain domain, CUpti_CallbackId cbid, const CUpti_CallbackData* data,
                        NowNs&& now_ns, LaunchEvent& out) noexcept {
  if (data == nullptr || !is_sync_api(domain, cbid) || data->correlationData == nullptr) return false;
  const bool runtime = domain == CUPTI_CB_DOMAIN_RUNTIME_API;
  if (!runtime && inside_runtime_sync()) return false;
  if (data->callbackSite == CUPTI_API_ENTER) {
    if (runtime) inside_runtime_sync() = true;
    *data->correlationData = static_cast<std::uint64_t>(now_ns()) | kSyncEntryMark;
    return false;
  }
  if (runtime) inside_runtime_sync() = false;
  const std::uint64_t entry = *data->correlationData;
  if ((entry & kSyncEntryMark) == 0) return false;  // its entry came before the callbacks were on
  bool ok = true;
  if (runtime) {
    const auto* rc = static_cast<const cudaError_t*>(data->functionReturnValue);
    ok = rc == nullptr || *rc == cudaSuccess;
  } else {
    const auto* rc = static_cast<const CUresult*>(data->functionReturnValue);
    ok = rc == nullptr || *rc == CUDA_SUCCESS;
  }
  if (!ok) return false;  // it did not wait for the GPU
  out = LaunchEvent{};
  out.correlation = data->correlationId;
  out.cpu_ns = static_cast<std::int64_t>(entry & ~kSyncEntryMark);
  out.sync_exit_ns = now_ns();
  return true;
}

// The stream a launch (a cbid of kLaunchCallbacks) was made on, from its parameters; `per_thread` for the
// _ptsz variants (their stream 0 is the calling thread's default stream, CU_STREAM_PER_THREAD). False for
// any other callback id or missing parameters.
inline bool launch_stream(CUpti_CallbackId cbid, const CUpti_CallbackData* data, CUstream& stream,
                          bool& per_thread) noexcept {
  if (data == nullptr || data->functionParams == nullptr) return false;
  const void* p = data->functionParams;
  per_thread = false;
  switch (cbid) {
    case CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel_ptsz: per_thread = true; [[fallthrough]];
    case CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel: stream = static_cast<const cuLaunchKernel_params*>(p)->hStream; return true;
    case CUPTI_DRIVER_TRACE_CBID_cuLaunchKernelEx_ptsz: per_thread = true; [[fallthrough]];
    case CUPTI_DRIVER_TRACE_CBID_cuLaunchKernelEx: {
      const CUlaunchConfig* c = static_cast<const cuLaunchKernelEx_params*>(p)->config;
      if (c == nullptr) return false;
      stream = c->hStream;
      return true;
    }
    case CUPTI_DRIVER_TRACE_CBID_cuLaunchCooperativeKernel_ptsz: per_thread = true; [[fallthrough]];
    case CUPTI_DRIVER_TRACE_CBID_cuLaunchCooperativeKernel:
      stream = static_cast<const cuLaunchCooperativeKernel_params*>(p)->hStream;
      return true;
    case CUPTI_DRIVER_TRACE_CBID_cuGraphLaunch_ptsz: per_thread = true; [[fallthrough]];
    case CUPTI_DRIVER_TRACE_CBID_cuGraphLaunch: stream = static_cast<const cuGraphLaunch_params*>(p)->hStream; return true;
    default: return false;
  }
}

// Without a clock (launch times unknown): tests and the table-only benchmark.
inline bool on_driver_api(LaunchTable& table, CUpti_CallbackId cbid, const CUpti_CallbackData* data) noexcept {
  LaunchEvent unused;
  return on_driver_api(table, cbid, data, [] { return std::int64_t{-1}; }, unused);
}

}  // namespace gearshift::cupti
