// A stand-in libcuda.so.1 with the few driver functions stream markers call (cupti/cuda_driver.hpp): loaded by
// a test before the injection library, which finds it as the process's driver. Its "GPU" writes a marker's
// value at once; the device pointer of a registered page is its host address (as with UVA).
#include <cuda.h>

#include <atomic>
#include <cstdint>

#define FAKE_EXPORT extern "C" __attribute__((visibility("default")))

namespace {
std::atomic<int> g_writes{0}, g_registrations{0};
}

FAKE_EXPORT CUresult cuStreamIsCapturing(CUstream, CUstreamCaptureStatus* s) {
  *s = CU_STREAM_CAPTURE_STATUS_NONE;
  return CUDA_SUCCESS;
}
FAKE_EXPORT CUresult cuStreamWriteValue64_v2(CUstream, CUdeviceptr p, cuuint64_t v, unsigned) {
  __atomic_store_n(reinterpret_cast<std::uint64_t*>(p), v, __ATOMIC_RELEASE);
  ++g_writes;
  return CUDA_SUCCESS;
}
FAKE_EXPORT CUresult cuMemHostRegister_v2(void*, size_t, unsigned) {
  ++g_registrations;
  return CUDA_SUCCESS;
}
FAKE_EXPORT CUresult cuMemHostGetDevicePointer_v2(CUdeviceptr* dp, void* p, unsigned) {
  *dp = reinterpret_cast<CUdeviceptr>(p);
  return CUDA_SUCCESS;
}
FAKE_EXPORT CUresult cuThreadExchangeStreamCaptureMode(CUstreamCaptureMode*) { return CUDA_SUCCESS; }
FAKE_EXPORT CUresult cuGetErrorName(CUresult, const char** s) {
  *s = "CUDA_ERROR_FAKE";
  return CUDA_SUCCESS;
}

// --- for the tests ---
FAKE_EXPORT int fake_cuda_writes() { return g_writes.load(); }
FAKE_EXPORT int fake_cuda_registrations() { return g_registrations.load(); }
