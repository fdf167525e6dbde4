// Rules on kernel names shared by the trace analysis (the optimizer ends a training step) and the model's
// kernel classes. One place, so that a step boundary and the "optimizer" class never disagree.
#pragma once

#include <string>
#include <string_view>

namespace gearshift::trace {

// True for optimizer kernels: PyTorch's multi_tensor_apply (fused/foreach Adam, AdamW, SGD), apex/DeepSpeed
// fused Adam, and kernels naming an optimizer or SGD. Case-insensitive; "hadamard" (a Hadamard transform) is
// not Adam, nor is a multi_tensor_apply copy (CopyFunctor: torch._foreach_copy_, FSDP2's per-layer copy-in).
bool is_optimizer_kernel(std::string_view name);

// The name in lower case (ASCII), as the rules below take it.
std::string lower_case_name(std::string_view name);

// Kernels of the matrix units, by the names of their libraries (cuBLAS/cuBLASLt, CUTLASS, cuDNN convolutions, the
// architectures' GEMM kernels; attention kernels apart). `lower` is the name in lower case. model::classify's
// gemm and attention classes; the step detector's structural update (a long stretch with neither, once a step).
bool is_attention_kernel_lower(std::string_view lower);
bool is_gemm_kernel_lower(std::string_view lower);

}  // namespace gearshift::trace
