// The few CUDA driver functions the injection library calls itself (stream markers, stream_marker.hpp),
// resolved from the libcuda.so.1 the process already loaded: the library never loads a driver of its own (a
// program that never initialised CUDA has no launches to mark). Types from cuda.h only; nothing is linked.
#pragma once

#include <cuda.h>

#include <optional>
#include <string>

namespace gearshift::cupti {

struct CudaDriver {
  CUresult (*stream_is_capturing)(CUstream, CUstreamCaptureStatus*) = nullptr;        // cuStreamIsCapturing
  CUresult (*stream_write_value64)(CUstream, CUdeviceptr, cuuint64_t, unsigned) = nullptr;  // cuStreamWriteValue64_v2
  CUresult (*mem_host_register)(void*, size_t, unsigned) = nullptr;                   // cuMemHostRegister_v2
  CUresult (*mem_host_get_device_pointer)(CUdeviceptr*, void*, unsigned) = nullptr;   // cuMemHostGetDevicePointer_v2
  CUresult (*thread_exchange_stream_capture_mode)(CUstreamCaptureMode*) = nullptr;    // cuThreadExchangeStreamCaptureMode
  CUresult (*get_error_name)(CUresult, const char**) = nullptr;                       // cuGetErrorName

  // "CUDA_ERROR_... (code N)".
  std::string describe(CUresult r) const;
};

// The functions from the loaded libcuda.so.1; none (and `error`: one line) when it is not loaded or lacks one.
std::optional<CudaDriver> load_cuda_driver(std::string* error);

}  // namespace gearshift::cupti
