#include "trace/kernel_names.hpp"

#include <gtest/gtest.h>

namespace gearshift::trace {
namespace {

TEST(KernelNames, OptimizerKernels) {
  // PyTorch's fused AdamW (as the H200 traces name it), apex/DeepSpeed, SGD, and a plain name.
  EXPECT_TRUE(is_optimizer_kernel(
      "void at::native::(anonymous namespace)::multi_tensor_apply_kernel<at::native::(anonymous namespace)::"
      "TensorListMetadata<4>, at::native::(anonymous namespace)::FusedAdamMathFunctor<float, 4, "
      "(at::native::ADAM_MODE)1, false>>(...)"));
  EXPECT_TRUE(is_optimizer_kernel("multi_tensor_adam_cuda_kernel"));
  EXPECT_TRUE(is_optimizer_kernel("void fused_adam_kernel<float>(float*, float*)"));
  EXPECT_TRUE(is_optimizer_kernel("sgd_momentum_kernel"));
  EXPECT_TRUE(is_optimizer_kernel("MyOptimizerStep"));
  EXPECT_TRUE(is_optimizer_kernel("Adam"));
}

TEST(KernelNames, NotOptimizerKernels) {
  EXPECT_FALSE(is_optimizer_kernel("nvjet_sm90_tst_192x192_64x3_2x1_v_bz_coopB_bias_NNN"));
  EXPECT_FALSE(is_optimizer_kernel("void at::native::vectorized_elementwise_kernel<4, at::native::GeluCUDAKernelImpl>"));
  EXPECT_FALSE(is_optimizer_kernel("fast_hadamard_transform_kernel"));  // Hadamard, not Adam
  EXPECT_FALSE(is_optimizer_kernel(""));
  // torch._foreach_copy_ (FSDP2's copy-in, once per layer) runs on multi_tensor_apply but is no update.
  EXPECT_FALSE(is_optimizer_kernel("void at::native::(anonymous namespace)::multi_tensor_apply_kernel<at::native::("
                                   "anonymous namespace)::TensorListMetadata<2>, at::native::(anonymous namespace)::"
                                   "CopyFunctor<c10::BFloat16, c10::BFloat16, c10::BFloat16, 2, 1, 1>>"));
}

}  // namespace
}  // namespace gearshift::trace

namespace gearshift::trace {
namespace {

// The matrix units' kernels by library name (lower case), shared by model::classify and the structural update.
TEST(KernelNames, GemmAndAttentionKernels) {
  EXPECT_TRUE(is_gemm_kernel_lower("nvjet_sm90_tst_192x128_64x5_1x2_h_bz_coopb_tnt"));
  EXPECT_TRUE(is_gemm_kernel_lower("sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x128x64"));
  EXPECT_TRUE(is_gemm_kernel_lower("void cutlass::kernel<cutlass_80_tensorop_s1688gemm>(params)"));
  EXPECT_TRUE(is_gemm_kernel_lower("void cudnn::cnn::conv2d_grouped_direct_kernel<float>"));
  EXPECT_FALSE(is_gemm_kernel_lower("void at::native::vectorized_elementwise_kernel<4, cudafunctor_add<float>>"));
  EXPECT_EQ(lower_case_name("Sm90_XMMA_Gemm"), "sm90_xmma_gemm");
  EXPECT_FALSE(is_gemm_kernel_lower("void at::native::reduce_kernel<128, 4>"));
  EXPECT_TRUE(is_attention_kernel_lower("cudnn_generated_fort_native_sdpa_sm90_flash_fprop_wgmma_f16"));
  EXPECT_TRUE(is_attention_kernel_lower("void pytorch_flash::flash_fwd_kernel<>"));
  EXPECT_FALSE(is_attention_kernel_lower("void at::native::vectorized_layer_norm_kernel<float>"));
}

}  // namespace
}  // namespace gearshift::trace
