// Exporters of samples: a CSV or JSONL log file and the Prometheus text exposition format.
#pragma once

#include <cstdio>
#include <string>
#include <vector>

#include "gpu/nvml.hpp"
#include "monitor/sampler.hpp"

namespace gearshift::monitor {

// One line per GPU and full sample. Columns / keys (units in the names):
//   t_s (s since the log opened, steady clock), gpu (NVML index), energy_j (since start, J),
//   energy_counter_mj (raw NVML counter, mJ), power_w (instant, W), sm_clock_mhz, mem_clock_mhz,
//   temperature_c, clock_event_reasons (NVML bits, decimal). A field NVML could not read is empty (CSV) or null.
class SampleLog {
 public:
  enum class Format { kCsv, kJsonl };
  // Throws std::runtime_error naming the file when it cannot be opened.
  SampleLog(const std::string& path, Format format, Ns t0);
  ~SampleLog();
  SampleLog(const SampleLog&) = delete;
  SampleLog& operator=(const SampleLog&) = delete;
  void write(const GpuSample& s);

 private:
  std::FILE* f_ = nullptr;
  Format format_;
  Ns t0_;
};

// Prometheus text format with dcgm-exporter's metric names and labels (gpu, UUID, pci_bus_id, modelName):
// DCGM_FI_DEV_POWER_USAGE (W), DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION (mJ), DCGM_FI_DEV_SM_CLOCK (MHz),
// DCGM_FI_DEV_MEM_CLOCK (MHz), DCGM_FI_DEV_GPU_TEMP (°C), DCGM_FI_DEV_CLOCKS_EVENT_REASONS (bits).
std::string prometheus_text(const std::vector<GpuSample>& samples, const std::vector<gpu::DeviceInfo>& devices);

}  // namespace gearshift::monitor
