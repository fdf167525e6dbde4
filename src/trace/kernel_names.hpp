// Rules on kernel names shared by the trace analysis (the optimizer ends a training step) and the model's
// kernel classes. One place, so that a step boundary and the "optimizer" class never disagree.
#pragma once

#include <string_view>

namespace gearshift::trace {

// True for optimizer kernels: PyTorch's multi_tensor_apply (fused/foreach Adam, AdamW, SGD), apex/DeepSpeed
// fused Adam, and kernels naming an optimizer or SGD. Case-insensitive; "hadamard" (a Hadamard transform) is
// not Adam, nor is a multi_tensor_apply copy (CopyFunctor: torch._foreach_copy_, FSDP2's per-layer copy-in).
bool is_optimizer_kernel(std::string_view name);

}  // namespace gearshift::trace
