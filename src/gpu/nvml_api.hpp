// Private: the NVML C ABI that gearshift uses, named once. Only src/gpu includes this file: the wrapper
// (nvml.cpp), the simulated GPU (sim/simgpu.cpp) and the ABI test (tests/nvml_abi_test.cpp).
//
// nvml.h is not on every build machine, so the few types and constants are declared here, with the values of
// NVIDIA's public NVML API reference; tests/nvml_abi_test.cpp checks them against nvml.h wherever the CUDA
// toolkit has one. Two lists, expanded where they are needed (the X-macro pattern):
//   GEARSHIFT_NVML_FUNCTIONS(X): X(name, return type, (parameter types)) for each function gearshift calls:
//     the function-pointer types (<name>_fn), the loader's table and dlsym calls (nvml.cpp) and the simulated
//     GPU's exported declarations (simgpu.cpp) all come from it.
//   GEARSHIFT_NVML_RETURNS(X): X(name, value, NvmlErrc, text) for each nvmlReturn_t value gearshift tells
//     apart: the enumerators, the wrapper's error classification and the simulated GPU's nvmlErrorString.
// Everything sits in namespace gearshift::gpu::nvml_abi, so that a file can include nvml.h beside it; the
// constants that nvml.h defines as macros have k-names here for the same reason.
#pragma once

#include <cstdint>

namespace gearshift::gpu::nvml_abi {

extern "C" {
struct nvmlDevice_st;                        // declared here, not found in nvml.h's global scope
typedef struct nvmlDevice_st* nvmlDevice_t;  // opaque handle owned by the library
}
typedef int nvmlReturn_t;  // an enum in nvml.h; int-sized in the C ABI

// X(name, value, NvmlErrc it classifies as, text): the simulated GPU answers nvmlErrorString with the text.
#define GEARSHIFT_NVML_RETURNS(X)                                                       \
  X(NVML_SUCCESS, 0, kOther, "Success")                                                 \
  X(NVML_ERROR_UNINITIALIZED, 1, kUninitialized, "Uninitialized")                       \
  X(NVML_ERROR_INVALID_ARGUMENT, 2, kInvalidArgument, "Invalid Argument")               \
  X(NVML_ERROR_NOT_SUPPORTED, 3, kNotSupported, "Not Supported")                        \
  X(NVML_ERROR_NO_PERMISSION, 4, kNoPermission, "Insufficient Permissions")             \
  X(NVML_ERROR_NOT_FOUND, 6, kNotFound, "Not Found")                                    \
  X(NVML_ERROR_INSUFFICIENT_SIZE, 7, kOther, "Insufficient Size")                       \
  X(NVML_ERROR_DRIVER_NOT_LOADED, 9, kLibraryMissing, "Driver Not Loaded")              \
  X(NVML_ERROR_LIBRARY_NOT_FOUND, 12, kLibraryMissing, "NVML Shared Library Not Found") \
  X(NVML_ERROR_FUNCTION_NOT_FOUND, 13, kFunctionMissing, "Function Not Found")          \
  X(NVML_ERROR_GPU_IS_LOST, 15, kGpuLost, "GPU is lost")                                \
  X(NVML_ERROR_UNKNOWN, 999, kOther, "Unknown Error")

#define GEARSHIFT_NVML_ENUMERATOR(name, value, errc, text) name = value,
enum : int { GEARSHIFT_NVML_RETURNS(GEARSHIFT_NVML_ENUMERATOR) };
#undef GEARSHIFT_NVML_ENUMERATOR

// nvmlClockType_t.
enum : int { NVML_CLOCK_GRAPHICS = 0, NVML_CLOCK_SM = 1, NVML_CLOCK_MEM = 2 };
// nvmlTemperatureSensors_t.
enum : int { NVML_TEMPERATURE_GPU = 0 };
// nvmlRestrictedAPI_t and nvmlEnableState_t.
enum : int { NVML_RESTRICTED_API_SET_APPLICATION_CLOCKS = 0 };
enum : int { NVML_FEATURE_DISABLED = 0, NVML_FEATURE_ENABLED = 1 };
// nvmlValueType_t.
enum : int {
  NVML_VALUE_TYPE_DOUBLE = 0,
  NVML_VALUE_TYPE_UNSIGNED_INT = 1,
  NVML_VALUE_TYPE_UNSIGNED_LONG = 2,
  NVML_VALUE_TYPE_UNSIGNED_LONG_LONG = 3,
  NVML_VALUE_TYPE_SIGNED_LONG_LONG = 4,
  NVML_VALUE_TYPE_SIGNED_INT = 5,
};

// Macros in nvml.h (NVML_DEVICE_MIG_*, NVML_FI_DEV_POWER_*, NVML_DEVICE_*_BUFFER_SIZE, nvmlClocksEventReason*).
constexpr unsigned kNvmlDeviceMigDisable = 0;
constexpr unsigned kNvmlDeviceMigEnable = 1;
constexpr unsigned kNvmlFieldPowerAverage = 185;  // field ids for nvmlDeviceGetFieldValues, values in mW
constexpr unsigned kNvmlFieldPowerInstant = 186;
constexpr unsigned kNvmlDeviceNameBufferSize = 64;
constexpr unsigned kNvmlDeviceUuidBufferSize = 80;
constexpr unsigned kNvmlDevicePciBusIdBufferSize = 32;
constexpr unsigned kNvmlDevicePciBusIdBufferV2Size = 16;
constexpr unsigned long long kNvmlClocksEventGpuIdle = 0x1ULL;
constexpr unsigned long long kNvmlClocksEventApplicationsClocksSetting = 0x2ULL;
constexpr unsigned long long kNvmlClocksEventSwPowerCap = 0x4ULL;
constexpr unsigned long long kNvmlClocksEventHwSlowdown = 0x8ULL;
constexpr unsigned long long kNvmlClocksEventSyncBoost = 0x10ULL;
constexpr unsigned long long kNvmlClocksEventSwThermalSlowdown = 0x20ULL;
constexpr unsigned long long kNvmlClocksEventHwThermalSlowdown = 0x40ULL;
constexpr unsigned long long kNvmlClocksEventHwPowerBrakeSlowdown = 0x80ULL;
constexpr unsigned long long kNvmlClocksEventDisplayClockSetting = 0x100ULL;

extern "C" {

typedef struct nvmlPciInfo_st {
  char busIdLegacy[kNvmlDevicePciBusIdBufferV2Size];
  unsigned int domain;
  unsigned int bus;
  unsigned int device;
  unsigned int pciDeviceId;
  unsigned int pciSubSystemId;
  char busId[kNvmlDevicePciBusIdBufferSize];  // "00000000:18:00.0"
} nvmlPciInfo_t;

typedef union nvmlValue_st {
  double dVal;
  unsigned int uiVal;
  unsigned long ulVal;
  unsigned long long ullVal;
  signed long long sllVal;
  signed int siVal;
  unsigned short usVal;
} nvmlValue_t;

typedef struct nvmlFieldValue_st {
  unsigned int fieldId;
  unsigned int scopeId;
  long long timestamp;    // µs since epoch
  long long latencyUsec;  // µs
  int valueType;          // nvmlValueType_t
  nvmlReturn_t nvmlReturn;
  nvmlValue_t value;
} nvmlFieldValue_t;

}  // extern "C"

// X(name, return type, (parameter types)); enum parameters (nvmlClockType_t, ...) are int. Units: energy mJ,
// power mW, clocks MHz, temperature °C. nvml.h 13 marks nvmlDeviceGetTemperature deprecated (for
// nvmlDeviceGetTemperatureV); drivers still export it, and older ones have nothing else.
#define GEARSHIFT_NVML_FUNCTIONS(X)                                                                                 \
  X(nvmlInit_v2, nvmlReturn_t, ())                                                                                  \
  X(nvmlShutdown, nvmlReturn_t, ())                                                                                 \
  X(nvmlErrorString, const char*, (nvmlReturn_t))                                                                   \
  X(nvmlDeviceGetCount_v2, nvmlReturn_t, (unsigned int*))                                                           \
  X(nvmlDeviceGetHandleByIndex_v2, nvmlReturn_t, (unsigned int, nvmlDevice_t*))                                     \
  X(nvmlDeviceGetName, nvmlReturn_t, (nvmlDevice_t, char*, unsigned int))                                           \
  X(nvmlDeviceGetUUID, nvmlReturn_t, (nvmlDevice_t, char*, unsigned int))                                           \
  X(nvmlDeviceGetPciInfo_v3, nvmlReturn_t, (nvmlDevice_t, nvmlPciInfo_t*))                                          \
  X(nvmlDeviceGetMigMode, nvmlReturn_t, (nvmlDevice_t, unsigned int*, unsigned int*))                               \
  X(nvmlDeviceGetTotalEnergyConsumption, nvmlReturn_t, (nvmlDevice_t, unsigned long long*))                         \
  X(nvmlDeviceGetPowerUsage, nvmlReturn_t, (nvmlDevice_t, unsigned int*))                                           \
  X(nvmlDeviceGetFieldValues, nvmlReturn_t, (nvmlDevice_t, int, nvmlFieldValue_t*))                                 \
  X(nvmlDeviceGetClockInfo, nvmlReturn_t, (nvmlDevice_t, int, unsigned int*))                                       \
  X(nvmlDeviceGetSupportedMemoryClocks, nvmlReturn_t, (nvmlDevice_t, unsigned int*, unsigned int*))                 \
  X(nvmlDeviceGetSupportedGraphicsClocks, nvmlReturn_t, (nvmlDevice_t, unsigned int, unsigned int*, unsigned int*)) \
  X(nvmlDeviceSetGpuLockedClocks, nvmlReturn_t, (nvmlDevice_t, unsigned int, unsigned int))                         \
  X(nvmlDeviceResetGpuLockedClocks, nvmlReturn_t, (nvmlDevice_t))                                                   \
  X(nvmlDeviceSetMemoryLockedClocks, nvmlReturn_t, (nvmlDevice_t, unsigned int, unsigned int))                      \
  X(nvmlDeviceResetMemoryLockedClocks, nvmlReturn_t, (nvmlDevice_t))                                                \
  X(nvmlDeviceGetTemperature, nvmlReturn_t, (nvmlDevice_t, int, unsigned int*))                                     \
  X(nvmlDeviceGetCurrentClocksEventReasons, nvmlReturn_t, (nvmlDevice_t, unsigned long long*))                      \
  X(nvmlDeviceGetEnforcedPowerLimit, nvmlReturn_t, (nvmlDevice_t, unsigned int*))                                   \
  X(nvmlDeviceGetAPIRestriction, nvmlReturn_t, (nvmlDevice_t, int, int*))

// Drivers before r535 have nvmlDeviceGetCurrentClocksEventReasons only under this older name (same signature);
// the loader falls back to it. Not in the list: the simulated GPU exports only the current name.
inline constexpr const char* kNvmlClocksEventReasonsLegacyName = "nvmlDeviceGetCurrentClocksThrottleReasons";

#define GEARSHIFT_NVML_FN_TYPE(name, ret, params) using name##_fn = ret(*) params;
GEARSHIFT_NVML_FUNCTIONS(GEARSHIFT_NVML_FN_TYPE)
#undef GEARSHIFT_NVML_FN_TYPE

}  // namespace gearshift::gpu::nvml_abi
