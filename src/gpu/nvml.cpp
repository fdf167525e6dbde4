#include "gpu/nvml.hpp"

#include <dlfcn.h>

#include <cstdlib>
#include <cstring>

#include "gpu/nvml_api.hpp"

namespace gearshift::gpu {

struct Nvml::Table {
  nvmlInit_v2_fn init = nullptr;
  nvmlShutdown_fn shutdown = nullptr;
  nvmlErrorString_fn error_string = nullptr;
  nvmlDeviceGetCount_v2_fn get_count = nullptr;
  nvmlDeviceGetHandleByIndex_v2_fn get_handle = nullptr;
  nvmlDeviceGetName_fn get_name = nullptr;
  nvmlDeviceGetUUID_fn get_uuid = nullptr;
  nvmlDeviceGetPciInfo_v3_fn get_pci = nullptr;
  nvmlDeviceGetMigMode_fn get_mig = nullptr;
  nvmlDeviceGetTotalEnergyConsumption_fn get_energy = nullptr;
  nvmlDeviceGetPowerUsage_fn get_power = nullptr;
  nvmlDeviceGetFieldValues_fn get_fields = nullptr;
  nvmlDeviceGetClockInfo_fn get_clock = nullptr;
  nvmlDeviceGetSupportedMemoryClocks_fn get_mem_clocks = nullptr;
  nvmlDeviceGetSupportedGraphicsClocks_fn get_sm_clocks = nullptr;
  nvmlDeviceSetGpuLockedClocks_fn set_sm_lock = nullptr;
  nvmlDeviceResetGpuLockedClocks_fn reset_sm_lock = nullptr;
  nvmlDeviceSetMemoryLockedClocks_fn set_mem_lock = nullptr;
  nvmlDeviceResetMemoryLockedClocks_fn reset_mem_lock = nullptr;
  nvmlDeviceGetTemperature_fn get_temp = nullptr;
  nvmlDeviceGetCurrentClocksEventReasons_fn get_reasons = nullptr;
  nvmlDeviceGetEnforcedPowerLimit_fn get_limit = nullptr;
  nvmlDeviceGetAPIRestriction_fn get_restriction = nullptr;
};

namespace {

template <class Fn>
void resolve(void* dl, Fn& slot, const char* name) {
  // POSIX guarantees that a data pointer from dlsym converts to a function pointer.
  slot = reinterpret_cast<Fn>(dlsym(dl, name));
}

NvmlErrc classify(int ret) {
  switch (ret) {
    case NVML_ERROR_UNINITIALIZED: return NvmlErrc::kUninitialized;
    case NVML_ERROR_NO_PERMISSION: return NvmlErrc::kNoPermission;
    case NVML_ERROR_NOT_SUPPORTED: return NvmlErrc::kNotSupported;
    case NVML_ERROR_GPU_IS_LOST: return NvmlErrc::kGpuLost;
    case NVML_ERROR_NOT_FOUND: return NvmlErrc::kNotFound;
    case NVML_ERROR_INVALID_ARGUMENT: return NvmlErrc::kInvalidArgument;
    case NVML_ERROR_FUNCTION_NOT_FOUND: return NvmlErrc::kFunctionMissing;
    case NVML_ERROR_LIBRARY_NOT_FOUND:
    case NVML_ERROR_DRIVER_NOT_LOADED: return NvmlErrc::kLibraryMissing;
    default: return NvmlErrc::kOther;
  }
}

NvmlError missing(const char* function) {
  return NvmlError{NvmlErrc::kFunctionMissing, NVML_ERROR_FUNCTION_NOT_FOUND, function,
                   "function not present in this NVML library (driver too old?)"};
}

nvmlDevice_t dev(void* h) { return static_cast<nvmlDevice_t>(h); }

std::string c_string(const char* buf, std::size_t cap) { return std::string(buf, strnlen(buf, cap)); }

}  // namespace

NvmlError Nvml::error(const char* function, int ret) const {
  std::string text = table_ && table_->error_string ? table_->error_string(ret) : "";
  if (text.empty()) text = "NVML error " + std::to_string(ret);
  return NvmlError{classify(ret), ret, function, std::move(text)};
}

std::string Nvml::default_library_path() {
  const char* env = std::getenv("GEARSHIFT_NVML_LIBRARY");
  return env && *env ? env : "libnvidia-ml.so.1";
}

Result<std::shared_ptr<const Nvml>> Nvml::open(const std::string& library_path) {
  std::shared_ptr<Nvml> n(new Nvml());
  n->path_ = library_path;
  dlerror();
  n->dl_ = dlopen(library_path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!n->dl_) {
    const char* why = dlerror();
    return NvmlError{NvmlErrc::kLibraryMissing, 0, "dlopen(" + library_path + ")",
                     why ? why : "cannot load library"};
  }
  auto t = std::make_unique<Table>();
  void* dl = n->dl_;
  resolve(dl, t->init, "nvmlInit_v2");
  resolve(dl, t->shutdown, "nvmlShutdown");
  resolve(dl, t->error_string, "nvmlErrorString");
  resolve(dl, t->get_count, "nvmlDeviceGetCount_v2");
  resolve(dl, t->get_handle, "nvmlDeviceGetHandleByIndex_v2");
  resolve(dl, t->get_name, "nvmlDeviceGetName");
  resolve(dl, t->get_uuid, "nvmlDeviceGetUUID");
  resolve(dl, t->get_pci, "nvmlDeviceGetPciInfo_v3");
  resolve(dl, t->get_mig, "nvmlDeviceGetMigMode");
  resolve(dl, t->get_energy, "nvmlDeviceGetTotalEnergyConsumption");
  resolve(dl, t->get_power, "nvmlDeviceGetPowerUsage");
  resolve(dl, t->get_fields, "nvmlDeviceGetFieldValues");
  resolve(dl, t->get_clock, "nvmlDeviceGetClockInfo");
  resolve(dl, t->get_mem_clocks, "nvmlDeviceGetSupportedMemoryClocks");
  resolve(dl, t->get_sm_clocks, "nvmlDeviceGetSupportedGraphicsClocks");
  resolve(dl, t->set_sm_lock, "nvmlDeviceSetGpuLockedClocks");
  resolve(dl, t->reset_sm_lock, "nvmlDeviceResetGpuLockedClocks");
  resolve(dl, t->set_mem_lock, "nvmlDeviceSetMemoryLockedClocks");
  resolve(dl, t->reset_mem_lock, "nvmlDeviceResetMemoryLockedClocks");
  resolve(dl, t->get_temp, "nvmlDeviceGetTemperature");
  resolve(dl, t->get_reasons, "nvmlDeviceGetCurrentClocksEventReasons");
  // Drivers before r535 only have the older name of the same call.
  if (!t->get_reasons) resolve(dl, t->get_reasons, "nvmlDeviceGetCurrentClocksThrottleReasons");
  resolve(dl, t->get_limit, "nvmlDeviceGetEnforcedPowerLimit");
  resolve(dl, t->get_restriction, "nvmlDeviceGetAPIRestriction");
  n->table_ = std::move(t);
  const Table& tb = *n->table_;
  if (!tb.init || !tb.shutdown) {
    dlclose(n->dl_);
    n->dl_ = nullptr;
    return missing(!tb.init ? "nvmlInit_v2" : "nvmlShutdown");
  }
  if (int ret = tb.init(); ret != NVML_SUCCESS) {
    NvmlError e = n->error("nvmlInit_v2", ret);
    n->table_->shutdown = nullptr;  // not initialised: the destructor must not shut down
    return e;
  }
  return std::shared_ptr<const Nvml>(std::move(n));
}

Nvml::~Nvml() {
  if (table_ && table_->shutdown) table_->shutdown();  // return code ignored: nothing to do about it at exit
  if (dl_) dlclose(dl_);
}

Result<unsigned> Nvml::device_count() const {
  if (!table_->get_count) return missing("nvmlDeviceGetCount_v2");
  unsigned n = 0;
  if (int ret = table_->get_count(&n); ret != NVML_SUCCESS) return error("nvmlDeviceGetCount_v2", ret);
  return n;
}

Result<Device> Nvml::device(unsigned index) const {
  if (!table_->get_handle) return missing("nvmlDeviceGetHandleByIndex_v2");
  nvmlDevice_t h = nullptr;
  if (int ret = table_->get_handle(index, &h); ret != NVML_SUCCESS) {
    return error("nvmlDeviceGetHandleByIndex_v2", ret);
  }
  return Device(shared_from_this(), h, index);
}

Result<std::vector<Device>> Nvml::devices() const {
  auto n = device_count();
  if (!n) return n.error();
  std::vector<Device> out;
  for (unsigned i = 0; i < n.value(); ++i) {
    auto d = device(i);
    if (!d) return d.error();
    out.push_back(d.value());
  }
  return out;
}

// ---- Device ----

#define GS_CALL(fn, name, ...)                                  \
  do {                                                          \
    const auto& t_ = nvml_->table();                            \
    if (!t_.fn) return missing(name);                           \
    if (int r_ = t_.fn(__VA_ARGS__); r_ != NVML_SUCCESS) {      \
      return nvml_->error(name, r_);                            \
    }                                                           \
  } while (0)

Result<DeviceInfo> Device::info() const {
  DeviceInfo d;
  d.index = index_;
  char name[NVML_DEVICE_NAME_BUFFER_SIZE] = {};
  GS_CALL(get_name, "nvmlDeviceGetName", dev(handle_), name, sizeof name);
  d.name = c_string(name, sizeof name);
  char uuid[NVML_DEVICE_UUID_BUFFER_SIZE] = {};
  GS_CALL(get_uuid, "nvmlDeviceGetUUID", dev(handle_), uuid, sizeof uuid);
  d.uuid = c_string(uuid, sizeof uuid);
  nvmlPciInfo_t pci{};
  GS_CALL(get_pci, "nvmlDeviceGetPciInfo_v3", dev(handle_), &pci);
  d.pci_bus_id = c_string(pci.busId, sizeof pci.busId);
  // MIG mode: a device without MIG answers NOT_SUPPORTED, which simply means "off".
  const auto& t = nvml_->table();
  if (t.get_mig) {
    unsigned current = 0, pending = 0;
    int ret = t.get_mig(dev(handle_), &current, &pending);
    if (ret == NVML_SUCCESS) {
      d.mig_enabled = current == NVML_DEVICE_MIG_ENABLE;
    } else if (ret != NVML_ERROR_NOT_SUPPORTED) {
      return nvml_->error("nvmlDeviceGetMigMode", ret);
    }
  }
  return d;
}

Result<std::vector<unsigned>> Device::supported_memory_clocks_mhz() const {
  unsigned n = 64;
  std::vector<unsigned> v(n);
  GS_CALL(get_mem_clocks, "nvmlDeviceGetSupportedMemoryClocks", dev(handle_), &n, v.data());
  v.resize(n);
  return v;
}

Result<std::vector<unsigned>> Device::supported_sm_clocks_mhz(unsigned mem_clock_mhz) const {
  unsigned n = 512;  // H200 has 110; leave room for any GPU
  std::vector<unsigned> v(n);
  GS_CALL(get_sm_clocks, "nvmlDeviceGetSupportedGraphicsClocks", dev(handle_), mem_clock_mhz, &n, v.data());
  v.resize(n);
  return v;
}

Result<std::uint64_t> Device::total_energy_mj() const {
  unsigned long long mj = 0;
  GS_CALL(get_energy, "nvmlDeviceGetTotalEnergyConsumption", dev(handle_), &mj);
  return static_cast<std::uint64_t>(mj);
}

namespace {
double field_to_double(const nvmlFieldValue_t& f) {
  switch (f.valueType) {
    case NVML_VALUE_TYPE_DOUBLE: return f.value.dVal;
    case NVML_VALUE_TYPE_UNSIGNED_INT: return f.value.uiVal;
    case NVML_VALUE_TYPE_UNSIGNED_LONG: return static_cast<double>(f.value.ulVal);
    case NVML_VALUE_TYPE_UNSIGNED_LONG_LONG: return static_cast<double>(f.value.ullVal);
    case NVML_VALUE_TYPE_SIGNED_LONG_LONG: return static_cast<double>(f.value.sllVal);
    case NVML_VALUE_TYPE_SIGNED_INT: return f.value.siVal;
    default: return f.value.uiVal;
  }
}
}  // namespace

Result<double> Device::instant_power_w() const {
  nvmlFieldValue_t f{};
  f.fieldId = NVML_FI_DEV_POWER_INSTANT;
  GS_CALL(get_fields, "nvmlDeviceGetFieldValues", dev(handle_), 1, &f);
  if (f.nvmlReturn != NVML_SUCCESS) return nvml_->error("nvmlDeviceGetFieldValues(POWER_INSTANT)", f.nvmlReturn);
  return field_to_double(f) / 1000.0;  // mW -> W
}

Result<double> Device::average_power_w() const {
  unsigned mw = 0;
  GS_CALL(get_power, "nvmlDeviceGetPowerUsage", dev(handle_), &mw);
  return mw / 1000.0;
}

Result<unsigned> Device::sm_clock_mhz() const {
  unsigned v = 0;
  GS_CALL(get_clock, "nvmlDeviceGetClockInfo", dev(handle_), NVML_CLOCK_SM, &v);
  return v;
}

Result<unsigned> Device::mem_clock_mhz() const {
  unsigned v = 0;
  GS_CALL(get_clock, "nvmlDeviceGetClockInfo", dev(handle_), NVML_CLOCK_MEM, &v);
  return v;
}

Result<unsigned> Device::temperature_c() const {
  unsigned v = 0;
  GS_CALL(get_temp, "nvmlDeviceGetTemperature", dev(handle_), NVML_TEMPERATURE_GPU, &v);
  return v;
}

Result<ClockEventReasons> Device::clock_event_reasons() const {
  unsigned long long v = 0;
  GS_CALL(get_reasons, "nvmlDeviceGetCurrentClocksEventReasons", dev(handle_), &v);
  return ClockEventReasons{v};
}

Result<double> Device::power_limit_w() const {
  unsigned mw = 0;
  GS_CALL(get_limit, "nvmlDeviceGetEnforcedPowerLimit", dev(handle_), &mw);
  return mw / 1000.0;
}

Result<bool> Device::clocks_api_restricted() const {
  int state = 0;
  GS_CALL(get_restriction, "nvmlDeviceGetAPIRestriction", dev(handle_), NVML_RESTRICTED_API_SET_APPLICATION_CLOCKS,
          &state);
  return state == NVML_FEATURE_ENABLED;
}

Status Device::set_locked_sm_clocks(unsigned min_mhz, unsigned max_mhz) const {
  GS_CALL(set_sm_lock, "nvmlDeviceSetGpuLockedClocks", dev(handle_), min_mhz, max_mhz);
  return std::monostate{};
}

Status Device::reset_locked_sm_clocks() const {
  GS_CALL(reset_sm_lock, "nvmlDeviceResetGpuLockedClocks", dev(handle_));
  return std::monostate{};
}

Status Device::set_locked_mem_clocks(unsigned min_mhz, unsigned max_mhz) const {
  GS_CALL(set_mem_lock, "nvmlDeviceSetMemoryLockedClocks", dev(handle_), min_mhz, max_mhz);
  return std::monostate{};
}

Status Device::reset_locked_mem_clocks() const {
  GS_CALL(reset_mem_lock, "nvmlDeviceResetMemoryLockedClocks", dev(handle_));
  return std::monostate{};
}

#undef GS_CALL

std::string ClockEventReasons::describe() const {
  static constexpr std::pair<unsigned long long, const char*> kNames[] = {
      {kNvmlClocksEventGpuIdle, "idle"},
      {kNvmlClocksEventApplicationsClocksSetting, "app-clocks"},
      {kNvmlClocksEventSwPowerCap, "sw-power-cap"},
      {kNvmlClocksEventHwSlowdown, "hw-slowdown"},
      {kNvmlClocksEventSyncBoost, "sync-boost"},
      {kNvmlClocksEventSwThermalSlowdown, "sw-thermal"},
      {kNvmlClocksEventHwThermalSlowdown, "hw-thermal"},
      {kNvmlClocksEventHwPowerBrakeSlowdown, "hw-power-brake"},
      {kNvmlClocksEventDisplayClockSetting, "display-clocks"},
  };
  std::string s;
  std::uint64_t known = 0;
  for (const auto& [bit, name] : kNames) {
    known |= bit;
    if (bits & bit) {
      if (!s.empty()) s += ',';
      s += name;
    }
  }
  if (bits & ~known) {
    if (!s.empty()) s += ',';
    s += "other";
  }
  return s.empty() ? "none" : s;
}

}  // namespace gearshift::gpu
