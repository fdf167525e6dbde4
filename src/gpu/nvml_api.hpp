// Private: the few NVML C types, constants and function signatures gearshift uses. There is no nvml.h on
// the build machines, so they are declared here once; the values are those of NVIDIA's public NVML API
// reference (checked against the nvidia-ml-py bindings, 12.x). Only src/gpu includes this file: the wrapper
// (nvml.cpp) and the simulated GPU (sim/simgpu.cpp).
#pragma once

#include <cstdint>

extern "C" {

typedef struct nvmlDevice_st* nvmlDevice_t;  // opaque handle owned by the library
typedef int nvmlReturn_t;

// nvmlReturn_t values.
enum : int {
  NVML_SUCCESS = 0,
  NVML_ERROR_UNINITIALIZED = 1,
  NVML_ERROR_INVALID_ARGUMENT = 2,
  NVML_ERROR_NOT_SUPPORTED = 3,
  NVML_ERROR_NO_PERMISSION = 4,
  NVML_ERROR_NOT_FOUND = 6,
  NVML_ERROR_INSUFFICIENT_SIZE = 7,
  NVML_ERROR_DRIVER_NOT_LOADED = 9,
  NVML_ERROR_LIBRARY_NOT_FOUND = 12,
  NVML_ERROR_FUNCTION_NOT_FOUND = 13,
  NVML_ERROR_GPU_IS_LOST = 15,
  NVML_ERROR_UNKNOWN = 999,
};

// nvmlClockType_t.
enum : int { NVML_CLOCK_GRAPHICS = 0, NVML_CLOCK_SM = 1, NVML_CLOCK_MEM = 2 };
// nvmlTemperatureSensors_t.
enum : int { NVML_TEMPERATURE_GPU = 0 };
// nvmlRestrictedAPI_t and nvmlEnableState_t.
enum : int { NVML_RESTRICTED_API_SET_APPLICATION_CLOCKS = 0 };
enum : int { NVML_FEATURE_DISABLED = 0, NVML_FEATURE_ENABLED = 1 };
// nvmlDeviceGetMigMode's current mode.
enum : unsigned { NVML_DEVICE_MIG_DISABLE = 0, NVML_DEVICE_MIG_ENABLE = 1 };
// Field ids for nvmlDeviceGetFieldValues (W reported in mW).
enum : unsigned { NVML_FI_DEV_POWER_AVERAGE = 185, NVML_FI_DEV_POWER_INSTANT = 186 };
// nvmlValueType_t.
enum : int {
  NVML_VALUE_TYPE_DOUBLE = 0,
  NVML_VALUE_TYPE_UNSIGNED_INT = 1,
  NVML_VALUE_TYPE_UNSIGNED_LONG = 2,
  NVML_VALUE_TYPE_UNSIGNED_LONG_LONG = 3,
  NVML_VALUE_TYPE_SIGNED_LONG_LONG = 4,
  NVML_VALUE_TYPE_SIGNED_INT = 5,
};

constexpr unsigned NVML_DEVICE_NAME_BUFFER_SIZE = 64;
constexpr unsigned NVML_DEVICE_UUID_BUFFER_SIZE = 80;
constexpr unsigned NVML_DEVICE_PCI_BUS_ID_BUFFER_SIZE = 32;
constexpr unsigned NVML_DEVICE_PCI_BUS_ID_BUFFER_V2_SIZE = 16;

typedef struct nvmlPciInfo_st {
  char busIdLegacy[NVML_DEVICE_PCI_BUS_ID_BUFFER_V2_SIZE];
  unsigned int domain;
  unsigned int bus;
  unsigned int device;
  unsigned int pciDeviceId;
  unsigned int pciSubSystemId;
  char busId[NVML_DEVICE_PCI_BUS_ID_BUFFER_SIZE];  // "00000000:18:00.0"
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

// Clock event (throttle) reason bits, nvmlClocksEventReason*.
constexpr unsigned long long kNvmlClocksEventGpuIdle = 0x1ULL;
constexpr unsigned long long kNvmlClocksEventApplicationsClocksSetting = 0x2ULL;
constexpr unsigned long long kNvmlClocksEventSwPowerCap = 0x4ULL;
constexpr unsigned long long kNvmlClocksEventHwSlowdown = 0x8ULL;
constexpr unsigned long long kNvmlClocksEventSyncBoost = 0x10ULL;
constexpr unsigned long long kNvmlClocksEventSwThermalSlowdown = 0x20ULL;
constexpr unsigned long long kNvmlClocksEventHwThermalSlowdown = 0x40ULL;
constexpr unsigned long long kNvmlClocksEventHwPowerBrakeSlowdown = 0x80ULL;
constexpr unsigned long long kNvmlClocksEventDisplayClockSetting = 0x100ULL;

// Function signatures (names without the pointer type are the exported symbols).
using nvmlInit_v2_fn = nvmlReturn_t (*)();
using nvmlShutdown_fn = nvmlReturn_t (*)();
using nvmlErrorString_fn = const char* (*)(nvmlReturn_t);
using nvmlDeviceGetCount_v2_fn = nvmlReturn_t (*)(unsigned int*);
using nvmlDeviceGetHandleByIndex_v2_fn = nvmlReturn_t (*)(unsigned int, nvmlDevice_t*);
using nvmlDeviceGetName_fn = nvmlReturn_t (*)(nvmlDevice_t, char*, unsigned int);
using nvmlDeviceGetUUID_fn = nvmlReturn_t (*)(nvmlDevice_t, char*, unsigned int);
using nvmlDeviceGetPciInfo_v3_fn = nvmlReturn_t (*)(nvmlDevice_t, nvmlPciInfo_t*);
using nvmlDeviceGetMigMode_fn = nvmlReturn_t (*)(nvmlDevice_t, unsigned int*, unsigned int*);
using nvmlDeviceGetTotalEnergyConsumption_fn = nvmlReturn_t (*)(nvmlDevice_t, unsigned long long*);  // mJ
using nvmlDeviceGetPowerUsage_fn = nvmlReturn_t (*)(nvmlDevice_t, unsigned int*);                   // mW
using nvmlDeviceGetFieldValues_fn = nvmlReturn_t (*)(nvmlDevice_t, int, nvmlFieldValue_t*);
using nvmlDeviceGetClockInfo_fn = nvmlReturn_t (*)(nvmlDevice_t, int, unsigned int*);  // MHz
using nvmlDeviceGetSupportedMemoryClocks_fn = nvmlReturn_t (*)(nvmlDevice_t, unsigned int*, unsigned int*);
using nvmlDeviceGetSupportedGraphicsClocks_fn = nvmlReturn_t (*)(nvmlDevice_t, unsigned int, unsigned int*,
                                                                 unsigned int*);
using nvmlDeviceSetGpuLockedClocks_fn = nvmlReturn_t (*)(nvmlDevice_t, unsigned int, unsigned int);
using nvmlDeviceResetGpuLockedClocks_fn = nvmlReturn_t (*)(nvmlDevice_t);
using nvmlDeviceSetMemoryLockedClocks_fn = nvmlReturn_t (*)(nvmlDevice_t, unsigned int, unsigned int);
using nvmlDeviceResetMemoryLockedClocks_fn = nvmlReturn_t (*)(nvmlDevice_t);
using nvmlDeviceGetTemperature_fn = nvmlReturn_t (*)(nvmlDevice_t, int, unsigned int*);  // °C
using nvmlDeviceGetCurrentClocksEventReasons_fn = nvmlReturn_t (*)(nvmlDevice_t, unsigned long long*);
using nvmlDeviceGetEnforcedPowerLimit_fn = nvmlReturn_t (*)(nvmlDevice_t, unsigned int*);  // mW
using nvmlDeviceGetAPIRestriction_fn = nvmlReturn_t (*)(nvmlDevice_t, int, int*);

}  // extern "C"
