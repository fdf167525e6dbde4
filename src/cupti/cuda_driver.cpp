#include "cupti/cuda_driver.hpp"

#include <dlfcn.h>

#include "cupti/dl_symbol.hpp"

namespace gearshift::cupti {

std::string CudaDriver::describe(CUresult r) const {
  const char* s = nullptr;
  if (get_error_name == nullptr || get_error_name(r, &s) != CUDA_SUCCESS || s == nullptr) s = "CUDA error";
  return std::string(s) + " (code " + std::to_string(static_cast<int>(r)) + ")";
}

std::optional<CudaDriver> load_cuda_driver(std::string* error) {
  // RTLD_NOLOAD: only the driver the program uses; the handle is never closed (the driver stays loaded anyway).
  void* h = dlopen("libcuda.so.1", RTLD_LAZY | RTLD_LOCAL | RTLD_NOLOAD);
  if (h == nullptr) {
    if (error != nullptr) *error = "libcuda.so.1 is not loaded in this process";
    return std::nullopt;
  }
  CudaDriver d;
  // The _v2 names are what cuda.h's macros call since CUDA 11/12 (cuStreamWriteValue64, cuMemHostRegister,
  // cuMemHostGetDevicePointer).
  const bool all = resolve(h, "cuStreamIsCapturing", d.stream_is_capturing) &&
                   resolve(h, "cuStreamWriteValue64_v2", d.stream_write_value64) &&
                   resolve(h, "cuMemHostRegister_v2", d.mem_host_register) &&
                   resolve(h, "cuMemHostGetDevicePointer_v2", d.mem_host_get_device_pointer) &&
                   resolve(h, "cuThreadExchangeStreamCaptureMode", d.thread_exchange_stream_capture_mode) &&
                   resolve(h, "cuGetErrorName", d.get_error_name);
  if (!all) {
    if (error != nullptr) *error = "libcuda.so.1 lacks a stream-marker function (driver older than CUDA 11.7?)";
    return std::nullopt;
  }
  return d;
}

}  // namespace gearshift::cupti
