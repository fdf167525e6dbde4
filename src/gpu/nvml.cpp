#include "gpu/nvml.hpp"

#include <dlfcn.h>

#include <cstdlib>
#include <cstring>

#include "gpu/nvml_api.hpp"

namespace gearshift::gpu {

using namespace nvml_abi;  // NOLINT: the C names of the private ABI header

// One slot per function of the list, named as the function; null when this library lacks it.
struct Nvml::Table {
#define GEARSHIFT_NVML_SLOT(name, ret, params) nvml_abi::name##_fn name = nullptr;
  GEARSHIFT_NVML_FUNCTIONS(GEARSHIFT_NVML_SLOT)
#undef GEARSHIFT_NVML_SLOT
};

namespace {

template <class Fn>
void resolve(void* dl, Fn& slot, const char* name) {
  // POSIX guarantees that a data pointer from dlsym converts to a function pointer.
  slot = reinterpret_cast<Fn>(dlsym(dl, name));
}

NvmlErrc classify(int ret) {
  switch (ret) {
#define GEARSHIFT_NVML_CLASSIFY(name, value, errc, text) \
  case name: return NvmlErrc::errc;
    GEARSHIFT_NVML_RETURNS(GEARSHIFT_NVML_CLASSIFY)
#undef GEARSHIFT_NVML_CLASSIFY
    default: return NvmlErrc::kOther;
  }
}

NvmlError missing(const char* function) {
  return NvmlError{NvmlErrc::kFunctionMissing, NVML_ERROR_FUNCTION_NOT_FOUND, function,
                   "function not present in this NVML library (driver too old?)"};
}

// The name of a function of the list, as a string; does not compile for a name outside the list.
#define GS_NVML_NAME(fn) (static_cast<void>(&Nvml::Table::fn), #fn)

nvmlDevice_t dev(void* h) { return static_cast<nvmlDevice_t>(h); }

std::string c_string(const char* buf, std::size_t cap) { return std::string(buf, strnlen(buf, cap)); }

}  // namespace

NvmlError Nvml::error(const char* function, int ret) const {
  std::string text = table_ && table_->nvmlErrorString ? table_->nvmlErrorString(ret) : "";
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
#define GEARSHIFT_NVML_RESOLVE(name, ret, params) resolve(dl, t->name, #name);
  GEARSHIFT_NVML_FUNCTIONS(GEARSHIFT_NVML_RESOLVE)
#undef GEARSHIFT_NVML_RESOLVE
  if (!t->nvmlDeviceGetCurrentClocksEventReasons) {
    resolve(dl, t->nvmlDeviceGetCurrentClocksEventReasons, kNvmlClocksEventReasonsLegacyName);
  }
  n->table_ = std::move(t);
  const Table& tb = *n->table_;
  if (!tb.nvmlInit_v2 || !tb.nvmlShutdown) {
    dlclose(n->dl_);
    n->dl_ = nullptr;
    return missing(!tb.nvmlInit_v2 ? GS_NVML_NAME(nvmlInit_v2) : GS_NVML_NAME(nvmlShutdown));
  }
  if (int ret = tb.nvmlInit_v2(); ret != NVML_SUCCESS) {
    NvmlError e = n->error(GS_NVML_NAME(nvmlInit_v2), ret);
    n->table_->nvmlShutdown = nullptr;  // not initialised: the destructor must not shut down
    return e;
  }
  return std::shared_ptr<const Nvml>(std::move(n));
}

Nvml::~Nvml() {
  if (table_ && table_->nvmlShutdown) table_->nvmlShutdown();  // return code ignored: nothing to do about it at exit
  if (dl_) dlclose(dl_);
}

Result<unsigned> Nvml::device_count() const {
  if (!table_->nvmlDeviceGetCount_v2) return missing(GS_NVML_NAME(nvmlDeviceGetCount_v2));
  unsigned n = 0;
  if (int ret = table_->nvmlDeviceGetCount_v2(&n); ret != NVML_SUCCESS) {
    return error(GS_NVML_NAME(nvmlDeviceGetCount_v2), ret);
  }
  return n;
}

Result<Device> Nvml::device(unsigned index) const {
  if (!table_->nvmlDeviceGetHandleByIndex_v2) return missing(GS_NVML_NAME(nvmlDeviceGetHandleByIndex_v2));
  nvmlDevice_t h = nullptr;
  if (int ret = table_->nvmlDeviceGetHandleByIndex_v2(index, &h); ret != NVML_SUCCESS) {
    return error(GS_NVML_NAME(nvmlDeviceGetHandleByIndex_v2), ret);
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

// Calls the NVML function `fn` (a name from the list), returning its error from the enclosing function.
#define GS_CALL(fn, ...)                                   \
  do {                                                     \
    const auto& t_ = nvml_->table();                       \
    if (!t_.fn) return missing(#fn);                       \
    if (int r_ = t_.fn(__VA_ARGS__); r_ != NVML_SUCCESS) { \
      return nvml_->error(#fn, r_);                        \
    }                                                      \
  } while (0)

Result<DeviceInfo> Device::info() const {
  DeviceInfo d;
  d.index = index_;
  char name[kNvmlDeviceNameBufferSize] = {};
  GS_CALL(nvmlDeviceGetName, dev(handle_), name, sizeof name);
  d.name = c_string(name, sizeof name);
  char uuid[kNvmlDeviceUuidBufferSize] = {};
  GS_CALL(nvmlDeviceGetUUID, dev(handle_), uuid, sizeof uuid);
  d.uuid = c_string(uuid, sizeof uuid);
  nvmlPciInfo_t pci{};
  GS_CALL(nvmlDeviceGetPciInfo_v3, dev(handle_), &pci);
  d.pci_bus_id = c_string(pci.busId, sizeof pci.busId);
  // MIG mode: a device without MIG answers NOT_SUPPORTED, which simply means "off".
  const auto& t = nvml_->table();
  if (t.nvmlDeviceGetMigMode) {
    unsigned current = 0, pending = 0;
    int ret = t.nvmlDeviceGetMigMode(dev(handle_), &current, &pending);
    if (ret == NVML_SUCCESS) {
      d.mig_enabled = current == kNvmlDeviceMigEnable;
    } else if (ret != NVML_ERROR_NOT_SUPPORTED) {
      return nvml_->error("nvmlDeviceGetMigMode", ret);
    }
  }
  return d;
}

Result<std::vector<unsigned>> Device::supported_memory_clocks_mhz() const {
  unsigned n = 64;
  std::vector<unsigned> v(n);
  GS_CALL(nvmlDeviceGetSupportedMemoryClocks, dev(handle_), &n, v.data());
  v.resize(n);
  return v;
}

Result<std::vector<unsigned>> Device::supported_sm_clocks_mhz(unsigned mem_clock_mhz) const {
  unsigned n = 512;  // H200 has 110; leave room for any GPU
  std::vector<unsigned> v(n);
  GS_CALL(nvmlDeviceGetSupportedGraphicsClocks, dev(handle_), mem_clock_mhz, &n, v.data());
  v.resize(n);
  return v;
}

Result<std::uint64_t> Device::total_energy_mj() const {
  unsigned long long mj = 0;
  GS_CALL(nvmlDeviceGetTotalEnergyConsumption, dev(handle_), &mj);
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
  f.fieldId = kNvmlFieldPowerInstant;
  GS_CALL(nvmlDeviceGetFieldValues, dev(handle_), 1, &f);
  if (f.nvmlReturn != NVML_SUCCESS) return nvml_->error("nvmlDeviceGetFieldValues(POWER_INSTANT)", f.nvmlReturn);
  return field_to_double(f) / 1000.0;  // mW -> W
}

Result<double> Device::average_power_w() const {
  unsigned mw = 0;
  GS_CALL(nvmlDeviceGetPowerUsage, dev(handle_), &mw);
  return mw / 1000.0;
}

Result<unsigned> Device::sm_clock_mhz() const {
  unsigned v = 0;
  GS_CALL(nvmlDeviceGetClockInfo, dev(handle_), NVML_CLOCK_SM, &v);
  return v;
}

Result<unsigned> Device::mem_clock_mhz() const {
  unsigned v = 0;
  GS_CALL(nvmlDeviceGetClockInfo, dev(handle_), NVML_CLOCK_MEM, &v);
  return v;
}

Result<unsigned> Device::temperature_c() const {
  unsigned v = 0;
  GS_CALL(nvmlDeviceGetTemperature, dev(handle_), NVML_TEMPERATURE_GPU, &v);
  return v;
}

Result<ClockEventReasons> Device::clock_event_reasons() const {
  unsigned long long v = 0;
  GS_CALL(nvmlDeviceGetCurrentClocksEventReasons, dev(handle_), &v);
  return ClockEventReasons{v};
}

Result<double> Device::power_limit_w() const {
  unsigned mw = 0;
  GS_CALL(nvmlDeviceGetEnforcedPowerLimit, dev(handle_), &mw);
  return mw / 1000.0;
}

Result<bool> Device::clocks_api_restricted() const {
  int state = 0;
  GS_CALL(nvmlDeviceGetAPIRestriction, dev(handle_), NVML_RESTRICTED_API_SET_APPLICATION_CLOCKS,
          &state);
  return state == NVML_FEATURE_ENABLED;
}

Status Device::set_locked_sm_clocks(unsigned min_mhz, unsigned max_mhz) const {
  GS_CALL(nvmlDeviceSetGpuLockedClocks, dev(handle_), min_mhz, max_mhz);
  return std::monostate{};
}

Status Device::reset_locked_sm_clocks() const {
  GS_CALL(nvmlDeviceResetGpuLockedClocks, dev(handle_));
  return std::monostate{};
}

Status Device::set_locked_mem_clocks(unsigned min_mhz, unsigned max_mhz) const {
  GS_CALL(nvmlDeviceSetMemoryLockedClocks, dev(handle_), min_mhz, max_mhz);
  return std::monostate{};
}

Status Device::reset_locked_mem_clocks() const {
  GS_CALL(nvmlDeviceResetMemoryLockedClocks, dev(handle_));
  return std::monostate{};
}

#undef GS_CALL
#undef GS_NVML_NAME

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
