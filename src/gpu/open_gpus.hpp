// Opening NVML and the GPUs a command works on, with one-line messages; the faces map OpenError's kind once
// (cli/main.cpp: exit codes 5 and 6).
#pragma once

#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "gpu/nvml.hpp"

namespace gearshift::gpu {

class OpenError : public std::runtime_error {
 public:
  enum class Kind { kNoGpu, kNoPermission };
  OpenError(Kind kind, const std::string& message) : std::runtime_error(message), kind_(kind) {}
  Kind kind() const noexcept { return kind_; }

 private:
  Kind kind_;
};

struct OpenedGpus {
  std::shared_ptr<const Nvml> nvml;
  std::vector<Device> devices;     // those selected
  std::vector<DeviceInfo> infos;   // same order
};

// All GPUs NVML sees, or only those CUDA_VISIBLE_DEVICES selects when `cuda_visible` and it is set.
// Throws OpenError kNoGpu when NVML cannot be loaded or initialised or no GPU is selected, kNoPermission when
// NVML refuses this user.
OpenedGpus open_gpus(bool cuda_visible);

}  // namespace gearshift::gpu
