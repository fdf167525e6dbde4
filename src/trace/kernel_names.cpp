#include "trace/kernel_names.hpp"

#include <algorithm>
#include <cctype>
#include <string>

namespace gearshift::trace {

std::string lower_case_name(std::string_view name) {
  std::string s(name);
  std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return s;
}

bool is_optimizer_kernel(std::string_view name) {
  const std::string s = lower_case_name(name);
  auto has = [&](std::string_view k) { return s.find(k) != std::string::npos; };
  // A foreach copy (torch._foreach_copy_: FSDP2's all-gather copy-in, once per layer) runs on
  // multi_tensor_apply but moves data; taken for the optimizer, it made a layer the step.
  if (has("multi_tensor_apply") && has("copyfunctor")) return false;
  if (has("multi_tensor_apply") || has("optimizer") || has("sgd")) return true;
  for (std::size_t at = s.find("adam"); at != std::string::npos; at = s.find("adam", at + 1))
    if (at == 0 || s[at - 1] != 'h') return true;  // "hadamard" is not Adam
  return false;
}

bool is_attention_kernel_lower(std::string_view s) {
  auto has = [&](std::string_view k) { return s.find(k) != std::string_view::npos; };
  return has("flash") || has("fmha") || has("attention") || has("sdpa") || has("attn");
}

bool is_gemm_kernel_lower(std::string_view s) {
  auto has = [&](std::string_view k) { return s.find(k) != std::string_view::npos; };
  return has("gemm") || has("nvjet") || has("cutlass") || has("xmma") || has("sm90_") || has("sm80_") ||
         has("cublas") || has("wgmma") || has("volta_") || has("ampere_") || has("turing_") ||
         has("implicit_convolve") || has("cudnn::cnn") || has("conv");
}

}  // namespace gearshift::trace
