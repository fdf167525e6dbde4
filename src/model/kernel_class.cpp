#include "model/kernel_class.hpp"

#include <string>

#include "trace/kernel_names.hpp"

namespace gearshift::model {

const char* to_string(KernelClass c) {
  switch (c) {
    case KernelClass::gemm: return "gemm";
    case KernelClass::attention: return "attention";
    case KernelClass::elementwise: return "elementwise";
    case KernelClass::reduction_norm: return "reduction/norm";
    case KernelClass::optimizer: return "optimizer";
    case KernelClass::copy_memset: return "copy/memset";
    case KernelClass::communication: return "communication";
    case KernelClass::other: return "other";
  }
  return "other";
}

namespace {
bool has(const std::string& s, std::string_view needle) { return s.find(needle) != std::string::npos; }
}  // namespace

KernelClass classify(trace::OpKind kind, std::string_view name) {
  if (kind != trace::OpKind::kernel) return KernelClass::copy_memset;
  const std::string s = trace::lower_case_name(name);
  if (has(s, "nccl")) return KernelClass::communication;
  if (trace::is_attention_kernel_lower(s)) return KernelClass::attention;
  if (trace::is_gemm_kernel_lower(s)) return KernelClass::gemm;
  if (trace::is_optimizer_kernel(name)) return KernelClass::optimizer;
  if (has(s, "norm") || has(s, "reduce") || has(s, "softmax") || has(s, "cross_entropy") || has(s, "nll_loss") ||
      has(s, "reduction") || has(s, "welford") || has(s, "argmax") || has(s, "cub::"))
    return KernelClass::reduction_norm;
  if (has(s, "copy") || has(s, "memcpy") || has(s, "memset") || has(s, "fill") || has(s, "cat") ||
      has(s, "gather") || has(s, "scatter") || has(s, "index"))
    return KernelClass::copy_memset;
  if (has(s, "elementwise") || has(s, "vectorized") || has(s, "unrolled") || has(s, "gelu") || has(s, "relu") ||
      has(s, "dropout") || has(s, "pointwise") || has(s, "triton_"))
    return KernelClass::elementwise;
  return KernelClass::other;
}

KernelCoefficients class_prior(KernelClass c) {
  switch (c) {
    case KernelClass::gemm: return {0.85, 0.08, 1.00, 0.30};
    case KernelClass::attention: return {0.80, 0.12, 0.95, 0.35};
    case KernelClass::elementwise: return {0.15, 0.75, 0.35, 0.95};
    case KernelClass::reduction_norm: return {0.30, 0.60, 0.45, 0.85};
    case KernelClass::optimizer: return {0.15, 0.75, 0.35, 0.95};
    case KernelClass::copy_memset: return {0.10, 0.70, 0.25, 0.90};
    case KernelClass::communication: return {0.10, 0.15, 0.20, 0.40};
    case KernelClass::other: return {0.50, 0.40, 0.60, 0.60};
  }
  return {};
}

}  // namespace gearshift::model
