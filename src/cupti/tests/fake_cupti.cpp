// A stand-in libcupti for CI (no GPU, no driver): the functions the tracer resolves, with behaviour chosen by
// $FAKE_CUPTI_MODE ("ok", "multiple": another subscriber already holds CUPTI, "old": API version 10, "cuda12":
// callback ids newer than CUDA 12 refused, "nocopy": copy and memset activity refused), plus
// helpers that play the driver: fire a launch callback, queue activity records, complete buffers on flush.
#include <cupti.h>

#include <atomic>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <mutex>
#include <string>
#include <vector>

#define FAKE_EXPORT extern "C" __attribute__((visibility("default")))

namespace {
std::atomic<CUpti_CallbackFunc> g_callback{nullptr};  // the library may unsubscribe from its own thread
void* g_userdata = nullptr;
CUpti_BuffersCallbackRequestFunc g_request = nullptr;
CUpti_BuffersCallbackCompleteFunc g_complete = nullptr;
std::mutex g_mu;  // g_pending: the tracer's controller thread flushes while the test adds records
std::vector<std::vector<std::uint8_t>> g_pending;
std::deque<std::string> g_names;  // keeps names alive (and in place) like CUPTI does
std::atomic<std::uint64_t> g_now{1'000'000};  // read by the tracer's controller thread too
int g_enabled_callbacks = 0;
std::atomic<unsigned> g_enabled_kinds{0};  // bit k: activity kind k enabled (kinds below 32)

std::string mode() {
  const char* m = std::getenv("FAKE_CUPTI_MODE");
  return m != nullptr ? m : "ok";
}

std::size_t record_size(CUpti_ActivityKind k) {
  switch (k) {
    case CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL: return sizeof(CUpti_ActivityKernel10);
    case CUPTI_ACTIVITY_KIND_MEMCPY: return sizeof(CUpti_ActivityMemcpy6);
    case CUPTI_ACTIVITY_KIND_MEMSET: return sizeof(CUpti_ActivityMemset4);
    case CUPTI_ACTIVITY_KIND_MARKER: return sizeof(CUpti_ActivityMarker2);
    default: return 0;
  }
}
}  // namespace

FAKE_EXPORT CUptiResult cuptiGetVersion(uint32_t* v) {
  *v = mode() == "old" ? 10 : 130001;
  return CUPTI_SUCCESS;
}
FAKE_EXPORT CUptiResult cuptiSubscribe(CUpti_SubscriberHandle* s, CUpti_CallbackFunc f, void* u) {
  if (mode() == "multiple") return CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED;
  *s = reinterpret_cast<CUpti_SubscriberHandle>(0x1);
  g_callback = f;
  g_userdata = u;
  return CUPTI_SUCCESS;
}
FAKE_EXPORT CUptiResult cuptiUnsubscribe(CUpti_SubscriberHandle) {
  g_callback = nullptr;
  return CUPTI_SUCCESS;
}
FAKE_EXPORT CUptiResult cuptiEnableCallback(uint32_t enable, CUpti_SubscriberHandle, CUpti_CallbackDomain domain,
                                            CUpti_CallbackId cbid) {
  if (mode() == "cuda12" && domain == CUPTI_CB_DOMAIN_DRIVER_API && cbid == CUPTI_DRIVER_TRACE_CBID_cuCtxSynchronize_v2)
    return CUPTI_ERROR_INVALID_PARAMETER;
  g_enabled_callbacks += enable != 0 ? 1 : -1;
  return CUPTI_SUCCESS;
}
FAKE_EXPORT CUptiResult cuptiActivityEnable(CUpti_ActivityKind k) {
  if (mode() == "nocopy" && (k == CUPTI_ACTIVITY_KIND_MEMCPY || k == CUPTI_ACTIVITY_KIND_MEMSET))
    return CUPTI_ERROR_NOT_COMPATIBLE;
  if (k < 32) g_enabled_kinds |= 1u << k;
  return CUPTI_SUCCESS;
}
FAKE_EXPORT CUptiResult cuptiActivityDisable(CUpti_ActivityKind k) {
  if (k < 32) g_enabled_kinds &= ~(1u << k);
  return CUPTI_SUCCESS;
}
FAKE_EXPORT CUptiResult cuptiActivityRegisterCallbacks(CUpti_BuffersCallbackRequestFunc r,
                                                       CUpti_BuffersCallbackCompleteFunc c) {
  g_request = r;
  g_complete = c;
  return CUPTI_SUCCESS;
}
FAKE_EXPORT CUptiResult cuptiActivityFlushAll(uint32_t) {
  std::lock_guard lock(g_mu);
  if (g_request == nullptr || g_complete == nullptr || g_pending.empty()) return CUPTI_SUCCESS;
  std::uint8_t* buf = nullptr;
  size_t size = 0, max_records = 0;
  g_request(&buf, &size, &max_records);
  if (buf == nullptr) return CUPTI_SUCCESS;
  size_t used = 0;
  for (const auto& r : g_pending) {
    if (used + r.size() > size) break;
    std::memcpy(buf + used, r.data(), r.size());
    used += r.size();
  }
  g_pending.clear();
  g_complete(nullptr, 0, buf, size, used);
  return CUPTI_SUCCESS;
}
FAKE_EXPORT CUptiResult cuptiActivityGetNextRecord(uint8_t* buffer, size_t valid, CUpti_Activity** record) {
  std::uint8_t* next = *record == nullptr ? buffer
                                          : reinterpret_cast<std::uint8_t*>(*record) + record_size((*record)->kind);
  if (next >= buffer + valid) return CUPTI_ERROR_MAX_LIMIT_REACHED;
  *record = reinterpret_cast<CUpti_Activity*>(next);
  return CUPTI_SUCCESS;
}
FAKE_EXPORT CUptiResult cuptiActivityGetNumDroppedRecords(CUcontext, uint32_t, size_t* dropped) {
  *dropped = 0;
  return CUPTI_SUCCESS;
}
FAKE_EXPORT CUptiResult cuptiGetResultString(CUptiResult r, const char** s) {
  *s = r == CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED ? "CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED"
                                                           : "CUPTI_ERROR_UNKNOWN";
  return CUPTI_SUCCESS;
}
FAKE_EXPORT CUptiResult cuptiGetTimestamp(uint64_t* t) {
  *t = g_now.fetch_add(1000) + 1000;
  return CUPTI_SUCCESS;
}

// --- helpers for the tests (the driver's side) ---
FAKE_EXPORT int fake_cupti_enabled_callbacks() { return g_enabled_callbacks; }
FAKE_EXPORT int fake_cupti_activity_enabled(int kind) { return kind < 32 && (g_enabled_kinds >> kind & 1u) ? 1 : 0; }
FAKE_EXPORT int fake_cupti_subscribed() { return g_callback.load() != nullptr ? 1 : 0; }
FAKE_EXPORT void fake_cupti_launch(uint32_t cbid, uint32_t correlation) {
  CUpti_CallbackData d{};
  d.callbackSite = CUPTI_API_ENTER;
  d.correlationId = correlation;
  if (CUpti_CallbackFunc cb = g_callback.load()) cb(g_userdata, CUPTI_CB_DOMAIN_DRIVER_API, cbid, &d);
}
namespace {
// One launch's entry and exit callbacks as the driver reports them: `params` (the launch API's parameter
// struct, stream 0x5), a successful return, one correlationData slot for both.
void fire_launch(uint32_t cbid, uint32_t correlation, const void* params, const char* symbol) {
  uint64_t slot = 0;
  CUresult rc = CUDA_SUCCESS;
  CUpti_CallbackData d{};
  d.callbackSite = CUPTI_API_ENTER;
  d.correlationId = correlation;
  d.correlationData = &slot;
  d.functionParams = params;
  d.functionReturnValue = &rc;
  d.symbolName = symbol;
  if (CUpti_CallbackFunc cb = g_callback.load()) cb(g_userdata, CUPTI_CB_DOMAIN_DRIVER_API, cbid, &d);
  d.callbackSite = CUPTI_API_EXIT;
  if (CUpti_CallbackFunc cb = g_callback.load()) cb(g_userdata, CUPTI_CB_DOMAIN_DRIVER_API, cbid, &d);
}
}  // namespace

// A kernel launch (cuLaunchKernel's parameters): symbolName is the mangled kernel name (kept alive here).
FAKE_EXPORT void fake_cupti_launch_named(uint32_t cbid, uint32_t correlation, const char* symbol) {
  const char* name = nullptr;
  {
    std::lock_guard lock(g_mu);
    name = g_names.emplace_back(symbol).c_str();
  }
  cuLaunchKernel_params params{};
  params.hStream = reinterpret_cast<CUstream>(0x5);
  fire_launch(cbid, correlation, &params, name);
}
// A graph launch (cuGraphLaunch's parameters; no symbol).
FAKE_EXPORT void fake_cupti_graph_launch(uint32_t correlation) {
  cuGraphLaunch_params params{};
  params.hStream = reinterpret_cast<CUstream>(0x5);
  fire_launch(CUPTI_DRIVER_TRACE_CBID_cuGraphLaunch, correlation, &params, nullptr);
}
// A synchronize as CUPTI reports it: entry, then exit with `result`; each entry/exit pair shares one
// correlationData slot. nested = 0: cuCtxSynchronize alone; 1: cudaDeviceSynchronize (runtime) around
// cuCtxSynchronize_v2 (driver, correlation + 1000), as CUDA 13's runtime makes it.
FAKE_EXPORT void fake_cupti_sync(uint32_t correlation, int result, int nested) {
  auto call = [](CUpti_CallbackDomain dom, CUpti_CallbackId id, CUpti_CallbackData& d, CUpti_ApiCallbackSite site) {
    d.callbackSite = site;
    if (CUpti_CallbackFunc cb = g_callback.load()) cb(g_userdata, dom, id, &d);
  };
  uint64_t rslot = 0, dslot = 0;
  CUresult drc = static_cast<CUresult>(result);
  cudaError_t rrc = result == 0 ? cudaSuccess : cudaErrorLaunchFailure;
  CUpti_CallbackData r{}, d{};
  r.correlationId = correlation;
  r.correlationData = &rslot;
  r.functionReturnValue = &rrc;
  d.correlationId = nested ? correlation + 1000 : correlation;
  d.correlationData = &dslot;
  d.functionReturnValue = &drc;
  const CUpti_CallbackId rid = CUPTI_RUNTIME_TRACE_CBID_cudaDeviceSynchronize_v3020;
  const CUpti_CallbackId did = nested ? CUPTI_DRIVER_TRACE_CBID_cuCtxSynchronize_v2 : CUPTI_DRIVER_TRACE_CBID_cuCtxSynchronize;
  if (nested) call(CUPTI_CB_DOMAIN_RUNTIME_API, rid, r, CUPTI_API_ENTER);
  call(CUPTI_CB_DOMAIN_DRIVER_API, did, d, CUPTI_API_ENTER);
  call(CUPTI_CB_DOMAIN_DRIVER_API, did, d, CUPTI_API_EXIT);
  if (nested) call(CUPTI_CB_DOMAIN_RUNTIME_API, rid, r, CUPTI_API_EXIT);
}
namespace {
// One kernel record queued under g_mu in one piece: the tracer's controller thread may flush (take g_pending)
// between any two locked sections, so the record is complete before it is visible.
void add_kernel(const char* name, uint64_t start, uint64_t end, uint32_t correlation, uint32_t device) {
  std::lock_guard lock(g_mu);
  g_names.emplace_back(name);
  std::vector<std::uint8_t> rec(sizeof(CUpti_ActivityKernel10));
  CUpti_ActivityKernel10 k{};
  k.kind = CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL;
  k.start = start;
  k.end = end;
  k.streamId = 7;
  k.deviceId = device;
  k.gridX = k.gridY = k.gridZ = 1;
  k.blockX = 128;
  k.blockY = k.blockZ = 1;
  k.correlationId = correlation;
  k.name = g_names.back().c_str();
  std::memcpy(rec.data(), &k, sizeof k);
  g_pending.push_back(std::move(rec));
}
}  // namespace

FAKE_EXPORT void fake_cupti_add_kernel(const char* name, uint64_t start, uint64_t end, uint32_t correlation) {
  add_kernel(name, start, end, correlation, 0);
}
// As fake_cupti_add_kernel, on CUDA device ordinal `device`.
FAKE_EXPORT void fake_cupti_add_kernel_on(const char* name, uint64_t start, uint64_t end, uint32_t correlation,
                                          uint32_t device) {
  add_kernel(name, start, end, correlation, device);
}
// A copy (memset != 0: a memset) of `bytes` on stream 7 of device 0, device memory to device memory.
FAKE_EXPORT void fake_cupti_add_copy(uint64_t start, uint64_t end, uint32_t correlation, uint64_t bytes, int memset) {
  std::lock_guard lock(g_mu);
  std::vector<std::uint8_t> rec;
  if (memset != 0) {
    CUpti_ActivityMemset4 m{};
    m.kind = CUPTI_ACTIVITY_KIND_MEMSET;
    m.bytes = bytes;
    m.start = start;
    m.end = end;
    m.streamId = 7;
    m.correlationId = correlation;
    m.memoryKind = CUPTI_ACTIVITY_MEMORY_KIND_DEVICE;
    rec.resize(sizeof m);
    std::memcpy(rec.data(), &m, sizeof m);
  } else {
    CUpti_ActivityMemcpy6 m{};
    m.kind = CUPTI_ACTIVITY_KIND_MEMCPY;
    m.copyKind = CUPTI_ACTIVITY_MEMCPY_KIND_DTOD;
    m.srcKind = m.dstKind = CUPTI_ACTIVITY_MEMORY_KIND_DEVICE;
    m.bytes = bytes;
    m.start = start;
    m.end = end;
    m.streamId = 7;
    m.correlationId = correlation;
    rec.resize(sizeof m);
    std::memcpy(rec.data(), &m, sizeof m);
  }
  g_pending.push_back(std::move(rec));
}
FAKE_EXPORT void fake_cupti_add_range(const char* name, uint32_t id, uint64_t start, uint64_t end) {
  std::lock_guard lock(g_mu);
  g_names.emplace_back(name);
  for (int phase = 0; phase < 2; ++phase) {
    CUpti_ActivityMarker2 m{};
    m.kind = CUPTI_ACTIVITY_KIND_MARKER;
    m.flags = phase == 0 ? CUPTI_ACTIVITY_FLAG_MARKER_START : CUPTI_ACTIVITY_FLAG_MARKER_END;
    m.id = id;
    m.timestamp = phase == 0 ? start : end;
    m.name = phase == 0 ? g_names.back().c_str() : nullptr;
    std::vector<std::uint8_t> rec(sizeof m);
    std::memcpy(rec.data(), &m, sizeof m);
    g_pending.push_back(std::move(rec));
  }
}
