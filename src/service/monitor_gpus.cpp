#include "service/monitor_gpus.hpp"

#include <chrono>
#include <utility>

#include "gpu/spec.hpp"
#include "service/error.hpp"

namespace gearshift::service {

namespace {

using Kind = ServiceError::Kind;

[[noreturn]] void nvml_failed(const gpu::NvmlError& e, const std::string& message) {
  using gpu::NvmlErrc;
  switch (e.code) {
    case NvmlErrc::kNoPermission: throw ServiceError(Kind::kNoPermission, message);
    case NvmlErrc::kLibraryMissing:
    case NvmlErrc::kUninitialized:
    case NvmlErrc::kNotFound:
    case NvmlErrc::kGpuLost: throw ServiceError(Kind::kNoGpu, message);
    default: throw ServiceError(Kind::kFailure, message);
  }
}

}  // namespace

MonitorGpus open_monitor(const std::optional<std::vector<unsigned>>& gpu_indices,
                         std::function<void(const std::string&)> on_note) {
  MonitorGpus out;
  auto n = gpu::Nvml::open();
  if (!n) nvml_failed(n.error(), "cannot use NVML (" + n.error().what() + ")");
  out.nvml = n.value();
  auto all = out.nvml->devices();
  if (!all) nvml_failed(all.error(), all.error().what());
  if (all.value().empty()) throw ServiceError(Kind::kNoGpu, "NVML sees no GPU");
  std::vector<gpu::Device> devices;
  if (!gpu_indices) {
    devices = all.value();
  } else {
    for (unsigned i : *gpu_indices) {
      if (i >= all.value().size())
        throw ServiceError(Kind::kNoGpu, "GPU index " + std::to_string(i) + " does not exist (NVML sees " +
                                             std::to_string(all.value().size()) + ")");
      devices.push_back(all.value()[i]);
    }
    if (devices.empty()) throw ServiceError(Kind::kBadArgument, "gpu_indices is empty");
  }
  monitor::SamplerOptions opt;
  // The energy counter's update period: the H200's measured one (data/gpus/h200.json), as `gearshift monitor`.
  opt.counter_period =
      std::chrono::nanoseconds(gpu::find_spec("h200").energy_counter_update_ns);
  opt.on_note = std::move(on_note);
  out.sampler = std::make_unique<monitor::Sampler>(std::move(devices), opt);
  return out;
}

}  // namespace gearshift::service
