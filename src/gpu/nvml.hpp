// NVML, loaded at run time with dlopen and wrapped once behind a typed interface.
//
// The library is `libnvidia-ml.so.1` unless the environment variable GEARSHIFT_NVML_LIBRARY names another
// file (tests point it at libgearshift_simgpu.so, the simulated GPU). Every call returns Result<T>: a value or
// an NvmlError carrying NVML's own message (nvmlErrorString). Nothing here throws. All methods are safe to call
// from several threads (NVML itself is thread-safe; the wrapper holds no mutable state after open()).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <variant>
#include <vector>

namespace gearshift::gpu {

enum class NvmlErrc {
  kLibraryMissing,    // dlopen failed (no driver, wrong GEARSHIFT_NVML_LIBRARY)
  kFunctionMissing,   // this driver's NVML lacks the function (older driver)
  kUninitialized,     // nvmlInit failed or NVML was shut down
  kNoPermission,      // the user may not do this (setting clocks needs root / CAP_SYS_ADMIN)
  kNotSupported,      // the device does not support it (e.g. no energy counter before Volta)
  kGpuLost,           // the GPU fell off the bus or stopped answering
  kNotFound,          // no such device
  kInvalidArgument,   // e.g. a clock outside the supported range
  kOther,             // any other NVML error; see nvml_return and message
};

struct NvmlError {
  NvmlErrc code = NvmlErrc::kOther;
  int nvml_return = 0;    // the raw nvmlReturn_t, 0 when the error is not NVML's (dlopen, dlsym)
  std::string function;   // NVML function that failed, e.g. "nvmlDeviceGetTotalEnergyConsumption"
  std::string message;    // nvmlErrorString's text or dlerror's
  std::string what() const { return function + ": " + message; }
};

// A value or an NvmlError (C++20 has no std::expected).
template <class T>
class Result {
 public:
  Result(T value) : v_(std::move(value)) {}          // NOLINT: implicit by design
  Result(NvmlError error) : v_(std::move(error)) {}  // NOLINT
  bool ok() const { return v_.index() == 0; }
  explicit operator bool() const { return ok(); }
  const T& value() const& { return std::get<0>(v_); }
  T& value() & { return std::get<0>(v_); }
  T&& value() && { return std::get<0>(std::move(v_)); }
  const NvmlError& error() const { return std::get<1>(v_); }
  T value_or(T fallback) const { return ok() ? value() : std::move(fallback); }

 private:
  std::variant<T, NvmlError> v_;
};
using Status = Result<std::monostate>;

struct DeviceInfo {
  unsigned index = 0;       // NVML index (PCI bus order)
  std::string name;         // e.g. "NVIDIA H200"
  std::string uuid;         // e.g. "GPU-5a1e..."
  std::string pci_bus_id;   // NVML form "00000000:18:00.0"
  bool mig_enabled = false; // false also when the device has no MIG support
};

// Clock-event ("throttle") reason bits as NVML reports them; describe() names the set bits.
struct ClockEventReasons {
  std::uint64_t bits = 0;
  std::string describe() const;  // "none" or e.g. "sw-power-cap,sw-thermal"
};

struct Nvml;  // forward, for Device

// One GPU. A cheap value; valid while the Nvml it came from lives.
class Device {
 public:
  unsigned index() const { return index_; }
  Result<DeviceInfo> info() const;
  Result<std::vector<unsigned>> supported_memory_clocks_mhz() const;                 // descending, MHz
  Result<std::vector<unsigned>> supported_sm_clocks_mhz(unsigned mem_clock_mhz) const;  // descending, MHz
  Result<std::uint64_t> total_energy_mj() const;   // energy since driver load, mJ; ticks every ≈100 ms on H200
  Result<double> instant_power_w() const;          // field NVML_FI_DEV_POWER_INSTANT, W
  Result<double> average_power_w() const;          // nvmlDeviceGetPowerUsage (≈1 s average on Ampere+), W
  Result<unsigned> sm_clock_mhz() const;           // current SM clock, MHz
  Result<unsigned> mem_clock_mhz() const;          // current memory clock, MHz
  Result<unsigned> temperature_c() const;          // GPU die, °C
  Result<ClockEventReasons> clock_event_reasons() const;
  Result<double> power_limit_w() const;            // enforced power limit, W
  // True when NVML restricts application-clock changes to root (nvmlDeviceGetAPIRestriction). Read-only probe.
  Result<bool> clocks_api_restricted() const;

  // Writes. Only the runtime's actuators call these, and only under --apply; probes never do.
  Status set_locked_sm_clocks(unsigned min_mhz, unsigned max_mhz) const;
  Status reset_locked_sm_clocks() const;
  Status set_locked_mem_clocks(unsigned min_mhz, unsigned max_mhz) const;
  Status reset_locked_mem_clocks() const;

 private:
  friend struct Nvml;
  Device(std::shared_ptr<const Nvml> nvml, void* handle, unsigned index)
      : nvml_(std::move(nvml)), handle_(handle), index_(index) {}
  std::shared_ptr<const Nvml> nvml_;
  void* handle_ = nullptr;
  unsigned index_ = 0;
};

// The loaded library. open() dlopens and calls nvmlInit_v2; the destructor calls nvmlShutdown and dlclose.
struct Nvml : std::enable_shared_from_this<Nvml> {
  // Library path: GEARSHIFT_NVML_LIBRARY if set, else "libnvidia-ml.so.1".
  static std::string default_library_path();
  static Result<std::shared_ptr<const Nvml>> open(const std::string& library_path = default_library_path());

  Result<unsigned> device_count() const;
  Result<Device> device(unsigned index) const;
  Result<std::vector<Device>> devices() const;  // all, in NVML order
  const std::string& library_path() const { return path_; }

  ~Nvml();
  Nvml(const Nvml&) = delete;
  Nvml& operator=(const Nvml&) = delete;

  // Internal: the resolved function table and error mapping (defined in nvml.cpp).
  struct Table;
  NvmlError error(const char* function, int ret) const;
  const Table& table() const { return *table_; }

 private:
  Nvml() = default;
  std::string path_;
  void* dl_ = nullptr;
  std::unique_ptr<Table> table_;
};

}  // namespace gearshift::gpu
