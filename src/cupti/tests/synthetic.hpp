// Synthetic CUPTI-free activity for the tracer tests: a training-like stream of steps.
#pragma once

#include <string>
#include <vector>

#include "cupti/activity.hpp"
#include "cupti/launch_table.hpp"

namespace gearshift::cupti::synthetic {

// Mangled names (as CUPTI reports them) of a 4-kernel step; demangled by the tracer.
inline const std::vector<std::string>& step_kernel_names() {
  static const std::vector<std::string> n = {"_Z9gemm_bf16PKfS0_Pfi", "_Z9layernormPfi", "_Z4geluPf",
                                             "_Z12adamw_fusedPfS_S_"};
  return n;
}

struct SyntheticRun {
  std::vector<GpuActivity> ops;
  std::vector<MarkerActivity> markers;
};

// `steps` steps of 4 kernels and one HtoD memcpy, 1 ms apart inside a step, 10 ms per step, each step wrapped
// in an NVTX "gearshift.step" range; launches recorded in `table` (correlation ids from 1).
inline SyntheticRun make_run(int steps, LaunchTable* table, std::int64_t t0 = 1'000'000'000) {
  SyntheticRun r;
  std::uint32_t corr = 1;
  for (int s = 0; s < steps; ++s) {
    std::int64_t base = t0 + s * 10'000'000;
    r.markers.push_back(MarkerActivity{MarkerActivity::Phase::start, static_cast<std::uint32_t>(s + 1), base,
                                       "gearshift.step"});
    for (std::size_t k = 0; k < step_kernel_names().size(); ++k) {
      GpuActivity a;
      a.name = step_kernel_names()[k];
      a.start_ns = base + static_cast<std::int64_t>(k) * 1'000'000;
      a.end_ns = a.start_ns + 500'000 + static_cast<std::int64_t>(k) * 1000;
      a.device = 0;
      a.stream = 7;
      a.correlation = corr;
      a.grid = {132, 1, 1};
      a.block = {256, 1, 1};
      a.registers_per_thread = 64;
      a.shared_memory_bytes = 4096;
      if (table != nullptr) table->record(corr, LaunchApi::kernel);
      ++corr;
      r.ops.push_back(a);
    }
    GpuActivity m;
    m.kind = trace::OpKind::memcpy;
    m.name = "Memcpy HtoD (Pinned -> Device)";
    m.start_ns = base + 5'000'000;
    m.end_ns = m.start_ns + 20'000;
    m.stream = 7;
    m.correlation = corr++;
    m.bytes = 1 << 20;
    r.ops.push_back(m);
    r.markers.push_back(MarkerActivity{MarkerActivity::Phase::end, static_cast<std::uint32_t>(s + 1),
                                       base + 9'000'000, ""});
  }
  return r;
}

}  // namespace gearshift::cupti::synthetic
