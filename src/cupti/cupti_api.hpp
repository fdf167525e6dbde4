// CUPTI loaded at run time: the only place that resolves CUPTI functions. Headers are used for types and
// constants only, so gearshift builds and links without CUPTI and runs against the CUPTI the user has.
//
// Search order (the first that loads wins):
//   1. $GEARSHIFT_CUPTI_LIBRARY (an explicit path; nothing else is tried when it fails),
//   2. a libcupti already loaded in the process (PyTorch links its bundled copy; two copies must not mix),
//   3. libcupti.so.13, libcupti.so.12 through the dynamic loader (LD_LIBRARY_PATH, ldconfig),
//   4. $CUDA_HOME / $CUDA_PATH / /usr/local/cuda: lib64/, extras/CUPTI/lib64/, lib/,
//   5. PyTorch's wheel: <python site-packages>/nvidia/cuda_cupti/lib/ for the python3.x prefixes in sys paths.
#pragma once

#include <cupti.h>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace gearshift::cupti {

// CUPTI_API_VERSION of CUDA 12.0 is 18; CUDA 13 switched to 130000+. Older CUPTIs lay records out otherwise.
inline constexpr std::uint32_t kMinCuptiApiVersion = 18;

struct CuptiApi {
  void* handle = nullptr;
  std::string path;              // the file that was loaded (as dlinfo / the candidate says)
  std::uint32_t version = 0;     // cuptiGetVersion
  bool v13_layout() const { return version >= 130000; }

  CUptiResult (*subscribe)(CUpti_SubscriberHandle*, CUpti_CallbackFunc, void*) = nullptr;
  CUptiResult (*unsubscribe)(CUpti_SubscriberHandle) = nullptr;
  CUptiResult (*enable_callback)(uint32_t, CUpti_SubscriberHandle, CUpti_CallbackDomain, CUpti_CallbackId) = nullptr;
  CUptiResult (*activity_enable)(CUpti_ActivityKind) = nullptr;
  CUptiResult (*activity_disable)(CUpti_ActivityKind) = nullptr;
  CUptiResult (*activity_register_callbacks)(CUpti_BuffersCallbackRequestFunc,
                                             CUpti_BuffersCallbackCompleteFunc) = nullptr;
  CUptiResult (*activity_flush_all)(uint32_t) = nullptr;
  CUptiResult (*activity_get_next_record)(uint8_t*, size_t, CUpti_Activity**) = nullptr;
  CUptiResult (*activity_get_num_dropped_records)(CUcontext, uint32_t, size_t*) = nullptr;
  CUptiResult (*get_result_string)(CUptiResult, const char**) = nullptr;
  CUptiResult (*get_timestamp)(uint64_t*) = nullptr;
  CUptiResult (*get_version)(uint32_t*) = nullptr;
  // cuptiGetGraphExecId: optional (null when the CUPTI lacks it); names a graph launch's graph in the feed.
  CUptiResult (*get_graph_exec_id)(CUgraphExec, uint32_t*) = nullptr;

  // "CUPTI_ERROR_... (code N)".
  std::string describe(CUptiResult r) const;
  std::int64_t now_ns() const;  // cuptiGetTimestamp, 0 when it fails
};

// Loads CUPTI (see the search order above). On failure returns none and sets `error` to one line naming
// what was tried. `override_path` is $GEARSHIFT_CUPTI_LIBRARY's value.
std::optional<CuptiApi> load_cupti(const std::string& override_path, std::string* error);

// The candidate file names/paths of steps 3-5, in order (for tests and `gearshift trace --help`).
std::vector<std::string> cupti_candidates();

}  // namespace gearshift::cupti
