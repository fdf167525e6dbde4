// Synthetic training-step trace builders for tests: layers of attention and routed experts (a MoE; experts
// without tokens are left out) and the optimizer update. MoeBuilder: GPU side only, ops 1 µs apart on one
// stream. RoutedCpuBuilder: with the CPU side (launches and the routing's synchronize).
#pragma once

#include <algorithm>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "trace/iteration.hpp"
#include "trace/record.hpp"

namespace gearshift::trace::test_support {

// The index of `name` in t.names, added when new.
inline std::uint32_t name_id(Trace& t, const std::string& name) {
  const auto at = static_cast<std::uint32_t>(std::find(t.names.begin(), t.names.end(), name) - t.names.begin());
  if (at == t.names.size()) t.names.push_back(name);
  return at;
}

struct MoeBuilder {
  Trace t;
  std::int64_t now = 1'000'000;
  std::mt19937 rng{7};
  std::vector<std::size_t> step_kernels;  // kernels of each step built
  std::vector<std::int64_t> step_start;   // GPU start of each step built, ns

  // The step built that starts where `it` starts (SIZE_MAX: none): a step found at the true boundaries.
  std::size_t built_at(const Iteration& it) const {
    auto at = std::find(step_start.begin(), step_start.end(), it.start_ns);
    return at == step_start.end() ? SIZE_MAX : static_cast<std::size_t>(at - step_start.begin());
  }

  void add(const std::string& name, OpKind kind = OpKind::kernel, std::int64_t dur = 2'000) {
    OpRecord r;
    r.name_id = name_id(t, name);
    r.kind = kind;
    r.start_ns = now;
    r.duration_ns = dur;
    r.stream = 7;
    t.ops.push_back(r);
    now += dur + 1'000;
    if (kind == OpKind::kernel) ++step_kernels.back();
  }
  // One MoE layer: attention, the router, a D2H sync for the routing, then only the experts that got tokens.
  void layer(bool backward, int skip_one_in) {
    const std::string p = backward ? "bwd_" : "";
    add(p + "rms_norm_kernel");
    add(p + "nvjet_gemm_qkv");
    add(p + "flash_attn_kernel");
    add(p + "nvjet_gemm_o");
    add(p + "router_gemm");
    add(p + "topk_kernel");
    add("Memcpy DtoH (Device -> Pinned)", OpKind::memcpy);
    for (int e = 0; e < 8; ++e) {
      if (skip_one_in > 0 && rng() % static_cast<unsigned>(skip_one_in) == 0) continue;  // no token for expert e
      add(p + "index_select_kernel");
      add(p + "nvjet_gemm_gate");
      add(p + "nvjet_gemm_up");
      add(p + "silu_mul_kernel");
      add(p + "nvjet_gemm_down");
      add(p + "index_add_kernel");
    }
  }
  void pass(int layers, int skip_one_in, bool backward) {
    for (int i = 0; i < layers; ++i) layer(backward, skip_one_in);
  }
  void update(const std::string& name = "multi_tensor_apply_kernel<FusedAdamMathFunctor>", int kernels = 4) {
    for (int i = 0; i < kernels; ++i) add(name);
  }
  // A training step: batch copy, forward, loss, backward, (AMP unscale,) the fused AdamW update.
  void step(int layers = 4, int skip_one_in = 12, bool amp = false) {
    step_kernels.push_back(0);
    step_start.push_back(now);
    add("Memcpy HtoD (Pinned -> Device)", OpKind::memcpy);
    add("embedding_kernel");
    pass(layers, skip_one_in, false);
    add("cross_entropy_loss");
    pass(layers, skip_one_in, true);
    add("embedding_backward_kernel");
    if (amp) {
      update("multi_tensor_apply_kernel<UnscaleOp>", 2);
      for (int i = 0; i < 10; ++i) add(i % 2 ? "Memcpy DtoH (Device -> Pinned)" : "amp_update_scale_kernel",
                                       i % 2 ? OpKind::memcpy : OpKind::kernel);
    }
    update();
    now += 300'000;
  }
};

// A MoE whose CPU launches an op every 10 µs and waits for the GPU at each layer's routing: after the routing's
// D2H copy it synchronizes (the copy and everything before it end; it returns 3 µs later), spends 600 µs on the
// dispatch (the GPU idles), then launches only the experts that got tokens. An op starts 5 µs after its launch,
// or when the stream frees. The GPU's work (100-150 µs GEMMs) outlasts the launches, so every synchronize
// waits: slower kernels lengthen the step, though the GPU idles half of it.
struct RoutedCpuBuilder {
  static constexpr std::int64_t kLaunchEvery = 10'000, kLatency = 5'000, kReturn = 3'000, kDispatch = 600'000;
  Trace t;
  std::mt19937 rng{11};
  std::int64_t cpu = 1'000'000, gpu_free = 0;
  RoutedCpuBuilder() { t.syncs_recorded = true; }

  void add(const std::string& name, std::int64_t dur, OpKind kind = OpKind::kernel) {
    OpRecord r;
    r.name_id = name_id(t, name);
    r.kind = kind;
    r.launch_ns = cpu;
    r.start_ns = std::max(gpu_free, cpu + kLatency);
    r.duration_ns = dur;
    r.stream = 7;
    r.correlation = static_cast<std::int64_t>(t.ops.size());
    t.ops.push_back(r);
    gpu_free = r.end_ns();
    cpu += kLaunchEvery;
  }
  void sync() {
    SyncRecord y;
    y.enter_ns = cpu;
    y.duration_ns = std::max(cpu, gpu_free) + kReturn - cpu;
    t.syncs.push_back(y);
    cpu = y.exit_ns() + 1'000;
  }
  void step(int layers = 6) {
    add("embedding_kernel", 20'000);
    for (int l = 0; l < layers; ++l) {
      add("rms_norm_kernel", 20'000);
      add("nvjet_gemm_qkv", 100'000);
      add("flash_attn_kernel", 150'000);
      add("router_gemm", 20'000);
      add("topk_kernel", 10'000);
      add("Memcpy DtoH (Device -> Pinned)", 2'000, OpKind::memcpy);
      sync();
      cpu += kDispatch;
      for (int e = 0; e < 4; ++e) {
        if (rng() % 6 == 0) continue;  // no token for expert e
        add("nvjet_gemm_expert", 80'000);
        add("index_add_kernel", 10'000);
      }
    }
    for (int i = 0; i < 4; ++i) add("multi_tensor_apply_kernel<FusedAdamMathFunctor>", 30'000);
    cpu += 200'000;  // the next batch
  }
};

}  // namespace gearshift::trace::test_support
