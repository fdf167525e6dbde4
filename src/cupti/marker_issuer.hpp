// The CUDA side of stream markers (stream_marker.hpp): writes the claimed marker on a launch's stream with
// cuStreamWriteValue64 into one pinned, mapped host word (allocated at the first marker, from the launching
// thread, whose context is current). Called from the launch callback's exit: never throws, never blocks
// beyond the two driver calls (cuStreamIsCapturing, cuStreamWriteValue64: ~µs).
//
// A stream being captured into a CUDA graph gets no marker (it would become a node of the user's graph), nor
// does a launch that failed. A driver that refuses the allocation or the write turns markers off for good,
// with one line for the exit note (problem()).
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

  // The claimed launch returned (`launched`: CUDA_SUCCESS) on `stream` (`per_thread`: a _ptsz launch);
  // `claim_ns`: when it was claimed (CUPTI clock).
  void after_launch(CUstream stream, bool per_thread, bool launched, std::uint32_t correlation,
                    std::int64_t claim_ns) noexcept;
  // Why markers went off ("" while they work).
  std::string problem() const;

 private:
  bool ensure_word() noexcept;

  CudaDriver d_;
  StreamMarkers& m_;
  // Only the claimer (one at a time) touches these.
  std::uint64_t* host_ = nullptr;
  CUdeviceptr device_ = 0;
  std::atomic<bool> failed_{false};
  std::string problem_;  // written once, before failed_ is set
};

}  // namespace gearshift::cupti
