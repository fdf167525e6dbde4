// Measurement windows on this machine's GPUs for the Python face (gearshift.Monitor): NVML opened, the GPUs
// chosen, and the sampler thread (monitor/sampler.hpp, the same code as `gearshift monitor`) started on them.
#pragma once

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "gpu/nvml.hpp"
#include "monitor/sampler.hpp"

namespace gearshift::service {

struct MonitorGpus {
  std::shared_ptr<const gpu::Nvml> nvml;      // outlives the sampler's devices
  std::unique_ptr<monitor::Sampler> sampler;  // started
};

// `gpu_indices`: NVML indices of the GPUs to measure; none: every GPU NVML sees. `on_note`: the sampler's one-line
// notices. Throws ServiceError: kNoPermission (NVML refuses this user), kNoGpu (NVML missing or failing, no GPU,
// an index NVML does not have), kBadArgument (an empty list), kFailure (any other NVML error).
MonitorGpus open_monitor(const std::optional<std::vector<unsigned>>& gpu_indices,
                         std::function<void(const std::string&)> on_note);

}  // namespace gearshift::service
