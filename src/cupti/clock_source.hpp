// Where the tracer reads each GPU's current clocks and power: one small interface, so tests can stand in.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace gearshift::cupti {

struct ClockReading {
  std::int32_t sm_clock_mhz = 0;   // current SM clock, MHz; 0 when the read failed
  std::int32_t mem_clock_mhz = 0;  // current memory clock, MHz; 0 when the read failed
  std::int32_t power_mw = -1;      // board power draw, mW; -1 when the read failed or is unsupported
};

class ClockSource {
 public:
  virtual ~ClockSource() = default;
  virtual int device_count() const = 0;  // devices indexed by CUDA ordinal 0..count-1
  // Never throws; fields that could not be read keep their "failed" values.
  virtual ClockReading read(int cuda_device) noexcept = 0;
  virtual std::string device_name(int cuda_device) const = 0;  // "NVIDIA H200", empty when unknown
};

// NVML through src/gpu's wrapper (libnvidia-ml.so.1, or $GEARSHIFT_NVML_LIBRARY): nvmlDeviceGetClockInfo (SM,
// MEM) and nvmlDeviceGetPowerUsage (mW; NVML refreshes it about every 100 ms on H200). Read-only: never sets
// anything. `cuda_visible_devices` is CUDA_VISIBLE_DEVICES's value (none: unset, every GPU in NVML order);
// CUDA ordinal i reads the NVML device gpu::cuda_visible_nvml_indices names. Returns nullptr and sets `error`
// when NVML cannot be loaded or initialised, or the variable names a MIG instance.
std::unique_ptr<ClockSource> open_nvml_clock_source(std::optional<std::string_view> cuda_visible_devices,
                                                    std::string* error);

}  // namespace gearshift::cupti
