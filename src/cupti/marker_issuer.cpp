#include "cupti/marker_issuer.hpp"

#include <sys/mman.h>

namespace gearshift::cupti {

namespace {
constexpr std::size_t kPage = 4096;
}

void MarkerIssuer::fail(const char* call, CUresult r) noexcept {
  m_.disable();
  if (failed_.exchange(true, std::memory_order_acq_rel)) return;  // the first reason is kept
  try {
    problem_ = std::string(call) + " failed: " + d_.describe(r);
  } catch (...) {
  }
  problem_set_.store(true, std::memory_order_release);
}

bool MarkerIssuer::ensure_word() noexcept {
  if (host_ != nullptr) return true;
  // Relaxed capture mode around the registration: another thread's graph capture in global mode must not be
  // invalidated by it (page-locking is among the calls such a capture forbids). Without it: no marker now.
  CUstreamCaptureMode mode = CU_STREAM_CAPTURE_MODE_RELAXED;
  if (d_.thread_exchange_stream_capture_mode(&mode) != CUDA_SUCCESS) return false;
  void* p = mmap(nullptr, kPage, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  CUresult r = CUDA_ERROR_OUT_OF_MEMORY;
  const char* call = "mmap";
  CUdeviceptr dev = 0;
  bool registered = false;
  if (p != MAP_FAILED) {
    r = d_.mem_host_register(p, kPage, CU_MEMHOSTREGISTER_PORTABLE | CU_MEMHOSTREGISTER_DEVICEMAP);
    call = "cuMemHostRegister";
    registered = r == CUDA_SUCCESS;
    if (registered) {
      r = d_.mem_host_get_device_pointer(&dev, p, 0);
      call = "cuMemHostGetDevicePointer";
    }
  }
  d_.thread_exchange_stream_capture_mode(&mode);
  if (r != CUDA_SUCCESS) {
    if (p != MAP_FAILED && !registered) munmap(p, kPage);  // a registered page stays (one page, left to CUDA)
    fail(call, r);
    return false;
  }
  host_ = static_cast<std::uint64_t*>(p);  // zero-filled by mmap
  device_ = dev;
  m_.set_word(host_);  // never unmapped: the writer thread may read it until the process ends
  return true;
}

void MarkerIssuer::after_launch(CUstream stream, bool per_thread, bool launched) noexcept {
  const std::int64_t claim_ns = m_.claimed_ns();
  if (per_thread && stream == nullptr) stream = CU_STREAM_PER_THREAD;
  // The capture check first: no registration during the user's own capture either.
  CUstreamCaptureStatus capture = CU_STREAM_CAPTURE_STATUS_NONE;
  if (!launched || d_.stream_is_capturing(stream, &capture) != CUDA_SUCCESS ||
      capture != CU_STREAM_CAPTURE_STATUS_NONE || !ensure_word()) {
    m_.abandon(claim_ns);
    return;
  }
  const std::uint64_t seq = m_.next_sequence();
  if (CUresult r = d_.stream_write_value64(stream, device_, seq, CU_STREAM_WRITE_VALUE_DEFAULT); r != CUDA_SUCCESS) {
    fail("cuStreamWriteValue64", r);
    m_.abandon(claim_ns);
    return;
  }
  m_.issued(seq);
}

void MarkerIssuer::context_destroying() noexcept { m_.disable(); }

std::string MarkerIssuer::problem() const {
  return problem_set_.load(std::memory_order_acquire) ? problem_ : std::string();
}

}  // namespace gearshift::cupti
