// Minimal NVML reader for the tracer (see clock_source.hpp for why it is separate from src/gpu).
#include <dlfcn.h>

#include <string>
#include <vector>

#include "cupti/clock_source.hpp"

namespace gearshift::cupti {
namespace {

// The few NVML ABI facts used here (nvml.h is not needed to build): return 0 is NVML_SUCCESS,
// clock types NVML_CLOCK_SM = 1 and NVML_CLOCK_MEM = 2, devices are opaque pointers.
using NvmlDevice = void*;
using InitFn = int (*)();
using ShutdownFn = int (*)();
using GetCountFn = int (*)(unsigned int*);
using ByIndexFn = int (*)(unsigned int, NvmlDevice*);
using ByPciFn = int (*)(const char*, NvmlDevice*);
using ByUuidFn = int (*)(const char*, NvmlDevice*);
using NameFn = int (*)(NvmlDevice, char*, unsigned int);
using ClockFn = int (*)(NvmlDevice, int, unsigned int*);
using PowerFn = int (*)(NvmlDevice, unsigned int*);
constexpr int kNvmlSuccess = 0;
constexpr int kClockSm = 1;
constexpr int kClockMem = 2;

template <typename F>
F sym(void* h, const char* name) {
  return reinterpret_cast<F>(dlsym(h, name));
}

class NvmlClockSource final : public ClockSource {
 public:
  NvmlClockSource(void* handle, ShutdownFn shutdown, ClockFn clock, PowerFn power, NameFn name,
                  std::vector<NvmlDevice> devs)
      : handle_(handle), shutdown_(shutdown), clock_(clock), power_(power), name_(name), devices_(std::move(devs)) {}
  ~NvmlClockSource() override {
    if (shutdown_ != nullptr) shutdown_();
    dlclose(handle_);
  }
  int device_count() const override { return static_cast<int>(devices_.size()); }
  ClockReading read(int d) noexcept override {
    ClockReading r;
    if (d < 0 || d >= device_count() || devices_[static_cast<std::size_t>(d)] == nullptr) return r;
    NvmlDevice dev = devices_[static_cast<std::size_t>(d)];
    unsigned int v = 0;
    if (clock_(dev, kClockSm, &v) == kNvmlSuccess) r.sm_clock_mhz = static_cast<std::int32_t>(v);
    if (clock_(dev, kClockMem, &v) == kNvmlSuccess) r.mem_clock_mhz = static_cast<std::int32_t>(v);
    if (power_ != nullptr && power_(dev, &v) == kNvmlSuccess) r.power_mw = static_cast<std::int32_t>(v);
    return r;
  }
  std::string device_name(int d) const override {
    if (name_ == nullptr || d < 0 || d >= device_count() || devices_[static_cast<std::size_t>(d)] == nullptr)
      return {};
    char buf[96] = {};
    if (name_(devices_[static_cast<std::size_t>(d)], buf, sizeof buf) != kNvmlSuccess) return {};
    return buf;
  }

 private:
  void* handle_;
  ShutdownFn shutdown_;
  ClockFn clock_;
  PowerFn power_;
  NameFn name_;
  std::vector<NvmlDevice> devices_;
};

}  // namespace

std::unique_ptr<ClockSource> open_nvml_clock_source(const std::vector<std::string>& visible, std::string* error) {
  void* h = dlopen("libnvidia-ml.so.1", RTLD_NOW | RTLD_LOCAL);
  if (h == nullptr) {
    if (error != nullptr) *error = "libnvidia-ml.so.1 not found";
    return nullptr;
  }
  auto init = sym<InitFn>(h, "nvmlInit_v2");
  auto shutdown = sym<ShutdownFn>(h, "nvmlShutdown");
  auto count = sym<GetCountFn>(h, "nvmlDeviceGetCount_v2");
  auto by_index = sym<ByIndexFn>(h, "nvmlDeviceGetHandleByIndex_v2");
  auto by_pci = sym<ByPciFn>(h, "nvmlDeviceGetHandleByPciBusId_v2");
  auto by_uuid = sym<ByUuidFn>(h, "nvmlDeviceGetHandleByUUID");
  auto name = sym<NameFn>(h, "nvmlDeviceGetName");
  auto clock = sym<ClockFn>(h, "nvmlDeviceGetClockInfo");
  auto power = sym<PowerFn>(h, "nvmlDeviceGetPowerUsage");
  if (init == nullptr || count == nullptr || by_index == nullptr || clock == nullptr) {
    if (error != nullptr) *error = "libnvidia-ml.so.1 lacks nvmlInit_v2/nvmlDeviceGetClockInfo";
    dlclose(h);
    return nullptr;
  }
  if (int rc = init(); rc != kNvmlSuccess) {
    if (error != nullptr) *error = "nvmlInit_v2 failed with NVML error " + std::to_string(rc);
    dlclose(h);
    return nullptr;
  }
  std::vector<NvmlDevice> devices;
  if (!visible.empty()) {
    for (const auto& id : visible) {
      NvmlDevice d = nullptr;
      int rc = -1;
      bool numeric = !id.empty() && id.find_first_not_of("0123456789") == std::string::npos && id.size() < 9;
      if (numeric) rc = by_index(static_cast<unsigned>(std::stoul(id)), &d);
      else if ((id.starts_with("GPU-") || id.starts_with("MIG-")) && by_uuid != nullptr) rc = by_uuid(id.c_str(), &d);
      else if (by_pci != nullptr) rc = by_pci(id.c_str(), &d);
      devices.push_back(rc == kNvmlSuccess ? d : nullptr);  // a device not found reads as "failed"
    }
  } else {
    unsigned int n = 0;
    if (count(&n) == kNvmlSuccess) {
      for (unsigned int i = 0; i < n; ++i) {
        NvmlDevice d = nullptr;
        if (by_index(i, &d) != kNvmlSuccess) d = nullptr;
        devices.push_back(d);
      }
    }
  }
  return std::make_unique<NvmlClockSource>(h, shutdown, clock, power, name, std::move(devices));
}

}  // namespace gearshift::cupti
