// Kernel classes and their DVFS priors: how much of a kernel's time scales with the SM clock and with the
// memory clock, and how hard it switches. Used when no sweep of that kernel was measured.
#pragma once

#include <string_view>

#include "model/time_law.hpp"
#include "trace/record.hpp"

namespace gearshift::model {

enum class KernelClass { gemm, attention, elementwise, reduction_norm, optimizer, copy_memset, communication, other };

const char* to_string(KernelClass c);

// Classify by op kind and (demangled) kernel name: cuBLAS/CUTLASS/nvjet GEMMs, flash/SDPA attention, NCCL,
// multi_tensor_apply / fused Adam, layer/RMS norm and reductions, elementwise/vectorized/copy kernels.
KernelClass classify(trace::OpKind kind, std::string_view name);

// DVFS coefficients of one kernel (docs/design.md "Physics"):
//   t(f, m) = t_ref · (sm_share·f_ref/f + mem_share·m_ref/m + (1 − sm_share − mem_share))
// or, with time_law = roofline (a kernel `gearshift calibrate` fitted so, model/time_law.hpp):
//   t(f, m) = t_ref · (max(sm_share·f_ref/f, mem_share·m_ref/m) + 1 − max(sm_share, mem_share))
// where sm_share and mem_share are the SM term A/f_ref and the memory term B/m_ref over t_ref; they overlap,
// so each is in [0, 1] but their sum may exceed 1. The kink (both terms equal) is at f/m = sm_share·f_ref /
// (mem_share·m_ref): slower SM clocks than that are SM-bound, faster ones memory-bound.
//   P(f, m) = P_idle(f) + static_w + activity·P_dyn_max·(V(f)/V(f_max))²·(f/f_max) + mem_traffic·P_mem_max·(m/m_max)
struct KernelCoefficients {
  double sm_share = 0.5;     // a_k, dimensionless in [0, 1]
  double mem_share = 0.4;    // b_k, dimensionless in [0, 1 − a_k]
  double activity = 0.6;     // u_k, switching activity relative to a dense bf16 GEMM (≈1)
  double mem_traffic = 0.6;  // share of peak DRAM bandwidth used, [0, 1]
  // W, kernel-specific power that does not scale with the SM clock, added to P_idle (0 for the class priors).
  // Fitted from a sweep at one memory clock (model/fit.hpp): it then also holds that kernel's memory power.
  double static_w = 0;
  TimeLaw time_law = TimeLaw::additive;  // the law of t above (class priors: additive)
  bool operator==(const KernelCoefficients&) const = default;
};

// Priors per class. Source: roofline reasoning on H100/H200-class GPUs (GEMM and attention compute-bound,
// elementwise/norm/optimizer/copy bandwidth-bound, NCCL latency/link-bound), consistent with the per-kernel
// clock preferences reported by Spaan et al. (arXiv 2601.08539): GEMMs tolerate a lower memory clock,
// memory-bound kernels a lower SM clock. They are estimates, refined by fitting where sweeps exist.
KernelCoefficients class_prior(KernelClass c);

}  // namespace gearshift::model
