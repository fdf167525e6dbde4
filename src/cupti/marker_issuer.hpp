// The CUDA side of stream markers (stream_marker.hpp): writes the claimed marker on a launch's stream with
// cuStreamWriteValue64 into one host word: a page of our own (mmap, never unmapped, so that the feed's writer
// may read it until the process ends whatever CUDA does), page-locked and mapped for the GPU at the first
// marker (cuMemHostRegister from the launching thread, whose context is current). Called from the launch
// callback's exit: never throws, never blocks beyond the two driver calls (cuStreamIsCapturing,
// cuStreamWriteValue64: ~µs).
//
// A stream being captured into a CUDA graph gets no marker (it would become a node of the user's graph), nor
// does a launch that failed. A driver that refuses the registration or the write turns markers off for good,
// with one line for the exit note (problem()). So does the destruction of any CUDA context (the
// registration may die with it: a write through a stale mapping would fault the user's context).
#pragma once

#include <cuda.h>

#include <atomic>
#include <cstdint>
#include <string>

#include "cupti/cuda_driver.hpp"
#include "cupti/stream_marker.hpp"

namespace gearshift::cupti {

class MarkerIssuer {
 public:
  MarkerIssuer(CudaDriver driver, StreamMarkers& markers) : d_(driver), m_(markers) {}

  // The launch holding the claim returned (`launched`: CUDA_SUCCESS) on `stream` (`per_thread`: a _ptsz
  // launch).
  void after_launch(CUstream stream, bool per_thread, bool launched) noexcept;
  // A CUDA context is about to be destroyed (CUPTI's resource callback): markers off for good, quietly (at
  // process exit this is the normal end).
  void context_destroying() noexcept;
  // Why markers went off ("" while they work, or after context_destroying()).
  std::string problem() const;

 private:
  bool ensure_word() noexcept;
  void fail(const char* call, CUresult r) noexcept;

  CudaDriver d_;
  StreamMarkers& m_;
  // Only the claimer (one at a time) touches these.
  std::uint64_t* host_ = nullptr;
  CUdeviceptr device_ = 0;
  std::atomic<bool> failed_{false};
  std::string problem_;  // written once, by whoever set failed_ first, before problem_set_
  std::atomic<bool> problem_set_{false};
};

}  // namespace gearshift::cupti
