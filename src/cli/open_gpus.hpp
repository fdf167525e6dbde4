// Opening NVML for a command, with the one-line messages and exit codes of commands.hpp.
#pragma once

#include <memory>
#include <vector>

#include "gpu/nvml.hpp"

namespace gearshift::cli {

struct OpenedGpus {
  std::shared_ptr<const gpu::Nvml> nvml;
  std::vector<gpu::Device> devices;     // those selected
  std::vector<gpu::DeviceInfo> infos;   // same order
};

// All GPUs NVML sees, or only those CUDA_VISIBLE_DEVICES selects when `cuda_visible` and it is set.
// Throws Exit(kNoGpu) when NVML cannot be loaded or initialised or no GPU is selected, Exit(kNoPermission)
// when NVML refuses this user.
OpenedGpus open_gpus(bool cuda_visible);

}  // namespace gearshift::cli
