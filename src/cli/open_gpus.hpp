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

// May this process lock clocks? Root or CAP_SYS_ADMIN is needed for locked clocks whatever NVML's API
// restriction says; `reason` says why not. Reads only: never calls a Set function.
bool may_set_clocks(bool privileged, bool api_restricted, std::string* reason);
bool process_is_privileged();  // euid 0 or CAP_SYS_ADMIN in the effective set (/proc/self/status)

}  // namespace gearshift::cli
