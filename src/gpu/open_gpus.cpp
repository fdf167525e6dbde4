#include "gpu/open_gpus.hpp"

#include <cstdlib>
#include <stdexcept>
#include <string>

#include "gpu/cuda_visible.hpp"

namespace gearshift::gpu {

namespace {
[[noreturn]] void fail(const gpu::NvmlError& e, const std::string& path) {
  if (e.code == gpu::NvmlErrc::kNoPermission) {
    throw OpenError(OpenError::Kind::kNoPermission, "NVML refuses this user: " + e.what());
  }
  std::string hint = e.code == gpu::NvmlErrc::kLibraryMissing
                         ? " (no NVIDIA driver here? GEARSHIFT_NVML_LIBRARY may name another library)"
                         : "";
  throw OpenError(OpenError::Kind::kNoGpu, "no GPU: NVML (" + path + ") " + e.what() + hint);
}
}  // namespace

OpenedGpus open_gpus(bool cuda_visible) {
  OpenedGpus out;
  std::string path = gpu::Nvml::default_library_path();
  auto nvml = gpu::Nvml::open(path);
  if (!nvml) fail(nvml.error(), path);
  out.nvml = nvml.value();
  auto all = out.nvml->devices();
  if (!all) fail(all.error(), path);
  std::vector<gpu::DeviceInfo> infos;
  for (const auto& d : all.value()) {
    auto info = d.info();
    if (!info) fail(info.error(), path);
    infos.push_back(info.value());
  }
  if (infos.empty()) throw OpenError(OpenError::Kind::kNoGpu, "no GPU: NVML (" + path + ") reports 0 devices");
  std::optional<std::string_view> cvd;
  const char* env = std::getenv("CUDA_VISIBLE_DEVICES");
  if (cuda_visible && env) cvd = env;
  std::vector<unsigned> pick;
  try {
    pick = gpu::cuda_visible_nvml_indices(infos, cvd);
  } catch (const std::invalid_argument& e) {
    throw OpenError(OpenError::Kind::kNoGpu, e.what());
  }
  if (pick.empty())
    throw OpenError(OpenError::Kind::kNoGpu, std::string("no GPU: CUDA_VISIBLE_DEVICES='") + env +
                                                 "' selects none of the " + std::to_string(infos.size()) + " GPUs NVML sees");
  for (unsigned i : pick) {
    out.devices.push_back(all.value()[i]);
    out.infos.push_back(infos[i]);
  }
  return out;
}


}  // namespace gearshift::gpu
