// Where the tracer reads each GPU's current clocks and power. One small interface so that the minimal NVML
// reader below can later be swapped for src/gpu's typed NVML wrapper without touching the tracer.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
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

// NVML loaded at run time (dlopen libnvidia-ml.so.1): nvmlDeviceGetClockInfo(SM, MEM) and
// nvmlDeviceGetPowerUsage (mW; NVML refreshes it about every 100 ms on H200). Read-only: never sets anything.
// `visible` is CUDA_VISIBLE_DEVICES split at commas: entry i names CUDA device i by NVML index ("2"), UUID
// ("GPU-...", "MIG-...") or PCI bus id; when empty, CUDA ordinal i is NVML index i (CUDA's default order
// equals NVML's PCI order on machines of one GPU model). Returns nullptr and sets `error` when NVML cannot be
// loaded or initialised.
std::unique_ptr<ClockSource> open_nvml_clock_source(const std::vector<std::string>& visible, std::string* error);

}  // namespace gearshift::cupti
