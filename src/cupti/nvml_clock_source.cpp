// The tracer's clock source on src/gpu's NVML wrapper: one NVML binding in the project, and the simulated GPU
// (GEARSHIFT_NVML_LIBRARY) stands in for NVML in tests. Read-only: never sets anything.
#include <cmath>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "cupti/clock_source.hpp"
#include "gpu/cuda_visible.hpp"
#include "gpu/nvml.hpp"

namespace gearshift::cupti {
namespace {

class NvmlClockSource final : public ClockSource {
 public:
  explicit NvmlClockSource(std::vector<std::optional<gpu::Device>> devices) : devices_(std::move(devices)) {}
  int device_count() const override { return static_cast<int>(devices_.size()); }
  ClockReading read(int d) noexcept override {
    ClockReading r;
    try {
      if (d < 0 || d >= device_count() || !devices_[static_cast<std::size_t>(d)]) return r;
      const gpu::Device& dev = *devices_[static_cast<std::size_t>(d)];
      if (auto v = dev.sm_clock_mhz()) r.sm_clock_mhz = static_cast<std::int32_t>(v.value());
      if (auto v = dev.mem_clock_mhz()) r.mem_clock_mhz = static_cast<std::int32_t>(v.value());
      if (auto p = dev.average_power_w()) r.power_mw = static_cast<std::int32_t>(std::lround(p.value() * 1000));
    } catch (...) {  // out of memory building an error message: this sample reads as failed
    }
    return r;
  }
  std::string device_name(int d) const override {
    if (d < 0 || d >= device_count() || !devices_[static_cast<std::size_t>(d)]) return {};
    auto info = devices_[static_cast<std::size_t>(d)]->info();
    return info ? info.value().name : std::string();
  }

 private:
  std::vector<std::optional<gpu::Device>> devices_;  // by CUDA ordinal; none: not found
};

}  // namespace

std::unique_ptr<ClockSource> open_nvml_clock_source(std::optional<std::string_view> cuda_visible_devices,
                                                    std::string* error) {
  auto fail = [&](const std::string& why) -> std::unique_ptr<ClockSource> {
    if (error != nullptr) *error = why;
    return nullptr;
  };
  auto nvml = gpu::Nvml::open();
  if (!nvml) return fail(nvml.error().what());
  auto devices = nvml.value()->devices();
  if (!devices) return fail(devices.error().what());
  std::vector<gpu::DeviceInfo> infos;
  for (const gpu::Device& d : devices.value()) {
    auto info = d.info();
    if (!info) return fail(info.error().what());
    infos.push_back(info.value());
  }
  std::vector<unsigned> indices;
  try {
    indices = gpu::cuda_visible_nvml_indices(infos, cuda_visible_devices);
  } catch (const std::invalid_argument& e) {
    return fail(std::string("CUDA_VISIBLE_DEVICES: ") + e.what());
  }
  std::vector<std::optional<gpu::Device>> chosen;
  for (unsigned i : indices)
    chosen.push_back(i < devices.value().size() ? std::optional<gpu::Device>(devices.value()[i]) : std::nullopt);
  return std::make_unique<NvmlClockSource>(std::move(chosen));
}

}  // namespace gearshift::cupti
