#include "cupti/marker_issuer.hpp"

namespace gearshift::cupti {

bool MarkerIssuer::ensure_word() noexcept {
  if (host_ != nullptr) return true;
  // Relaxed capture mode around the allocation: another thread's graph capture in global mode must not be
  // invalidated by it (cuMemHostAlloc is one of the calls such a capture forbids).
  CUstreamCaptureMode mode = CU_STREAM_CAPTURE_MODE_RELAXED;
  const bool exchanged = d_.thread_exchange_stream_capture_mode(&mode) == CUDA_SUCCESS;
  void* p = nullptr;
  CUresult r = d_.mem_host_alloc(&p, 64, CU_MEMHOSTALLOC_PORTABLE | CU_MEMHOSTALLOC_DEVICEMAP);
  const char* call = "cuMemHostAlloc";
  CUdeviceptr dev = 0;
  if (r == CUDA_SUCCESS) {
    r = d_.mem_host_get_device_pointer(&dev, p, 0);
    call = "cuMemHostGetDevicePointer";
  }
  if (exchanged) d_.thread_exchange_stream_capture_mode(&mode);
  if (r != CUDA_SUCCESS) {
    try {
      problem_ = std::string(call) + " failed: " + d_.describe(r);
    } catch (...) {
    }
    failed_.store(true, std::memory_order_release);
    m_.disable();
    return false;
  }
  host_ = static_cast<std::uint64_t*>(p);
  *host_ = 0;
  device_ = dev;
  m_.set_word(host_);  // never freed: the writer thread may read it until the process ends
  return true;
}

void MarkerIssuer::after_launch(CUstream stream, bool per_thread, bool launched, std::uint32_t correlation,
                                std::int64_t claim_ns) noexcept {
  if (!launched || !ensure_word()) {
    m_.abandon(claim_ns);
    return;
  }
  if (per_thread && stream == nullptr) stream = CU_STREAM_PER_THREAD;
  CUstreamCaptureStatus capture = CU_STREAM_CAPTURE_STATUS_NONE;
  if (d_.stream_is_capturing(stream, &capture) != CUDA_SUCCESS || capture != CU_STREAM_CAPTURE_STATUS_NONE) {
    m_.abandon(claim_ns);
    return;
  }
  const std::uint64_t seq = m_.next_sequence();
  if (CUresult r = d_.stream_write_value64(stream, device_, seq, CU_STREAM_WRITE_VALUE_DEFAULT); r != CUDA_SUCCESS) {
    if (!failed_.load(std::memory_order_acquire)) {
      try {
        problem_ = "cuStreamWriteValue64 failed: " + d_.describe(r);
      } catch (...) {
      }
      failed_.store(true, std::memory_order_release);
    }
    m_.disable();
    m_.abandon(claim_ns);
    return;
  }
  m_.issued(correlation, seq, claim_ns);
}

std::string MarkerIssuer::problem() const {
  return failed_.load(std::memory_order_acquire) ? problem_ : std::string();
}

}  // namespace gearshift::cupti
