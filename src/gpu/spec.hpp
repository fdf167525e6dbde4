// GPU spec database: supported clocks, power limits, idle power, V-f knee, switch latency.
// The figures live in data/gpus/<name>.json (each with its source) and are embedded in the binary.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace gearshift::gpu {

struct GpuSpec {
  std::string name;       // short key, e.g. "h200"
  std::string full_name;  // e.g. "NVIDIA H200 SXM 141GB"
  std::vector<int> sm_clocks_mhz;   // supported SM clocks, ascending, MHz (JSON: min, max, step; step may be fractional)
  std::vector<int> mem_clocks_mhz;  // supported memory clocks, ascending, MHz
  int default_sm_clock_mhz = 0;     // boost clock the GPU runs at when unlocked, MHz
  int default_mem_clock_mhz = 0;    // MHz
  double power_limit_min_w = 0, power_limit_max_w = 0, power_limit_default_w = 0;  // W
  double idle_power_min_clock_w = 0;  // idle board power at the lowest SM clock, W
  double idle_power_max_clock_w = 0;  // idle board power at the highest SM clock, W
  double max_board_power_w = 0;       // W
  int voltage_knee_mhz = 0;           // V(f) flat below, linear above (Schoonhoven et al., PMBS'22 shape)
  double memory_power_w_at_max_clock = 0;  // memory subsystem power at full traffic and max memory clock, W
  int observed_capped_sm_clock_mhz = 0;  // SM clock dense GEMMs sagged to at the default power cap (0: unknown)
  // The times in ns; the JSON keeps its fields in ms and µs, converted once by parse_spec.
  double switch_latency_ns = 0;                 // clock-change transition estimate (JSON "switch_latency_ms")
  std::int64_t energy_counter_update_ns = 0;    // NVML total-energy counter update period ("energy_counter_update_ms")
  // Time constant of the board power's fall from a kernel's power to the idle power once the GPU has no kernel
  // left to run (0: at once, where not measured). JSON "gap_power_decay_us", optional.
  double gap_power_decay_ns = 0;
  // Length of the window over which the GPU holds its average power at the power limit (0: the limit binds each
  // kernel on its own, where not measured). JSON "power_limit_window_us", optional.
  double power_limit_window_ns = 0;
  std::vector<std::pair<std::string, std::string>> sources;  // field -> where the figure comes from

  int max_sm_clock_mhz() const { return sm_clocks_mhz.back(); }
  int min_sm_clock_mhz() const { return sm_clocks_mhz.front(); }
  int max_mem_clock_mhz() const { return mem_clocks_mhz.back(); }
};

// Names of the embedded specs, sorted ("a100", "a40", "b200", "h100", "h200", "rtx3080ti", "v100").
std::vector<std::string> spec_names();

// The embedded spec of that name (case-insensitive; "H200", "h200-sxm" accepted as "h200"), or of the spec a
// device name maps to (spec_name_for_device: "Tesla V100-SXM2-32GB" is "v100").
// Throws std::invalid_argument naming the known specs when the name is unknown.
GpuSpec find_spec(std::string_view name);

// The embedded spec name for a device name as NVML reports it ("NVIDIA H200", "NVIDIA A100-SXM4-80GB",
// "NVIDIA GeForce RTX 3080 Ti"): a spec name equal to one or more consecutive alphanumeric words of it,
// case-insensitive. Empty when none matches (no spec for that GPU), and empty for another board of a GPU with
// a spec: a PCIe or NVL card of an SXM spec ("NVIDIA H100 PCIe": 350 W, SM clocks to 1755 MHz against the
// SXM5's 700 W and 1980 MHz), or another memory size ("A100-PCIE-40GB": 1215 MHz memory against 1593);
// `why`, where given, then says which (else it is left alone).
std::string spec_name_for_device(std::string_view device_name, std::string* why = nullptr);

// Parse a spec from JSON text (the data/gpus format). Throws std::invalid_argument on a bad file,
// naming `origin` and the field.
GpuSpec parse_spec(std::string_view json_text, std::string_view origin);

}  // namespace gearshift::gpu
