// The NVML ABI that gearshift declares (gpu/nvml_api.hpp) against NVIDIA's nvml.h, checked at compile time
// where the build found nvml.h (CMake's GEARSHIFT_NVML_INCLUDE_DIR; the CUDA toolkit's include folder by
// default); and the simulated GPU's exports against the list, checked at run time everywhere.
#include <dlfcn.h>
#include <gtest/gtest.h>

#include <cstddef>
#include <tuple>
#include <type_traits>

#if GEARSHIFT_HAVE_NVML_H
#define NVML_NO_UNVERSIONED_FUNC_DEFS  // declare the versioned names only, as gearshift calls them
#include <nvml.h>
#endif

#include "gpu/nvml_api.hpp"

namespace gs = gearshift::gpu::nvml_abi;

#if GEARSHIFT_HAVE_NVML_H
namespace {

// True when a call through A passes and returns the same bits as one through B: the same type, or an int for
// an enum of the same size (gearshift declares enum parameters as int), or gearshift's struct for nvml.h's
// (whose layouts are checked field by field below); pointers, const and function types compared part by part.
template <class A, class B>
struct AbiSame : std::is_same<A, B> {};
template <class A, class B>
  requires(std::is_integral_v<A> && std::is_enum_v<B>)
struct AbiSame<A, B> : std::bool_constant<sizeof(A) == sizeof(B)> {};
template <class A, class B>
struct AbiSame<A*, B*> : AbiSame<A, B> {};
template <class A, class B>
struct AbiSame<const A, const B> : AbiSame<A, B> {};
template <>
struct AbiSame<gs::nvmlDevice_st, ::nvmlDevice_st> : std::true_type {};  // opaque: only pointers cross
template <>
struct AbiSame<gs::nvmlPciInfo_t, ::nvmlPciInfo_t> : std::true_type {};
template <>
struct AbiSame<gs::nvmlFieldValue_t, ::nvmlFieldValue_t> : std::true_type {};

template <class A, class B>
struct ArgsSame : std::false_type {};
template <class... A, class... B>
  requires(sizeof...(A) == sizeof...(B))
struct ArgsSame<std::tuple<A...>, std::tuple<B...>> : std::bool_constant<(AbiSame<A, B>::value && ...)> {};

template <class RA, class... A, class RB, class... B>
struct AbiSame<RA(A...), RB(B...)>
    : std::bool_constant<AbiSame<RA, RB>::value && ArgsSame<std::tuple<A...>, std::tuple<B...>>::value> {};

// Every function of the list has nvml.h's signature. Deprecation is no concern here (nvml.h 13 deprecates
// nvmlDeviceGetTemperature and the legacy name below; gpu/nvml_api.hpp says why they stay).
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"
#define CHECK_FUNCTION(name, ret, params) \
  static_assert(AbiSame<gs::name##_fn, decltype(&::name)>::value, #name " differs from nvml.h");
GEARSHIFT_NVML_FUNCTIONS(CHECK_FUNCTION)
#undef CHECK_FUNCTION
static_assert(AbiSame<gs::nvmlDeviceGetCurrentClocksEventReasons_fn,
                      decltype(&::nvmlDeviceGetCurrentClocksThrottleReasons)>::value);
#pragma GCC diagnostic pop

// Every return code of the list has nvml.h's value.
#define CHECK_RETURN(name, value, errc, text) \
  static_assert(gs::name == static_cast<int>(::name), #name " differs from nvml.h");
GEARSHIFT_NVML_RETURNS(CHECK_RETURN)
#undef CHECK_RETURN
static_assert(sizeof(gs::nvmlReturn_t) == sizeof(::nvmlReturn_t));

// Enumerators (nvml.h's are of named enum types).
#define CHECK_ENUMERATOR(name) static_assert(gs::name == static_cast<int>(::name), #name " differs from nvml.h");
CHECK_ENUMERATOR(NVML_CLOCK_GRAPHICS)
CHECK_ENUMERATOR(NVML_CLOCK_SM)
CHECK_ENUMERATOR(NVML_CLOCK_MEM)
CHECK_ENUMERATOR(NVML_TEMPERATURE_GPU)
CHECK_ENUMERATOR(NVML_RESTRICTED_API_SET_APPLICATION_CLOCKS)
CHECK_ENUMERATOR(NVML_FEATURE_DISABLED)
CHECK_ENUMERATOR(NVML_FEATURE_ENABLED)
CHECK_ENUMERATOR(NVML_VALUE_TYPE_DOUBLE)
CHECK_ENUMERATOR(NVML_VALUE_TYPE_UNSIGNED_INT)
CHECK_ENUMERATOR(NVML_VALUE_TYPE_UNSIGNED_LONG)
CHECK_ENUMERATOR(NVML_VALUE_TYPE_UNSIGNED_LONG_LONG)
CHECK_ENUMERATOR(NVML_VALUE_TYPE_SIGNED_LONG_LONG)
CHECK_ENUMERATOR(NVML_VALUE_TYPE_SIGNED_INT)
#undef CHECK_ENUMERATOR

// Constants that nvml.h defines as macros.
static_assert(gs::kNvmlDeviceMigDisable == NVML_DEVICE_MIG_DISABLE);
static_assert(gs::kNvmlDeviceMigEnable == NVML_DEVICE_MIG_ENABLE);
static_assert(gs::kNvmlFieldPowerAverage == NVML_FI_DEV_POWER_AVERAGE);
static_assert(gs::kNvmlFieldPowerInstant == NVML_FI_DEV_POWER_INSTANT);
static_assert(gs::kNvmlDeviceNameBufferSize == NVML_DEVICE_NAME_BUFFER_SIZE);
static_assert(gs::kNvmlDeviceUuidBufferSize == NVML_DEVICE_UUID_BUFFER_SIZE);
static_assert(gs::kNvmlDevicePciBusIdBufferSize == NVML_DEVICE_PCI_BUS_ID_BUFFER_SIZE);
static_assert(gs::kNvmlDevicePciBusIdBufferV2Size == NVML_DEVICE_PCI_BUS_ID_BUFFER_V2_SIZE);
#define REASON(bits) static_cast<unsigned long long>(bits)  // nvml.h writes them as signed long long
static_assert(gs::kNvmlClocksEventGpuIdle == REASON(nvmlClocksEventReasonGpuIdle));
static_assert(gs::kNvmlClocksEventApplicationsClocksSetting == REASON(nvmlClocksEventReasonApplicationsClocksSetting));
static_assert(gs::kNvmlClocksEventSwPowerCap == REASON(nvmlClocksEventReasonSwPowerCap));
static_assert(gs::kNvmlClocksEventSyncBoost == REASON(nvmlClocksEventReasonSyncBoost));
static_assert(gs::kNvmlClocksEventSwThermalSlowdown == REASON(nvmlClocksEventReasonSwThermalSlowdown));
static_assert(gs::kNvmlClocksEventDisplayClockSetting == REASON(nvmlClocksEventReasonDisplayClockSetting));
// The hardware reasons keep their older "Throttle" names in nvml.h 13.
static_assert(gs::kNvmlClocksEventHwSlowdown == REASON(nvmlClocksThrottleReasonHwSlowdown));
static_assert(gs::kNvmlClocksEventHwThermalSlowdown == REASON(nvmlClocksThrottleReasonHwThermalSlowdown));
static_assert(gs::kNvmlClocksEventHwPowerBrakeSlowdown == REASON(nvmlClocksThrottleReasonHwPowerBrakeSlowdown));
#undef REASON

// Struct layouts, field by field: offset, size and type.
#define CHECK_FIELD(type, field)                                                                        \
  static_assert(offsetof(gs::type, field) == offsetof(::type, field), #type "::" #field " offset");    \
  static_assert(sizeof(gs::type::field) == sizeof(::type::field), #type "::" #field " size");          \
  static_assert(AbiSame<decltype(gs::type::field), decltype(::type::field)>::value, #type "::" #field " type");
#define CHECK_STRUCT(type)                                      \
  static_assert(sizeof(gs::type) == sizeof(::type), #type " size"); \
  static_assert(alignof(gs::type) == alignof(::type), #type " alignment");

CHECK_STRUCT(nvmlPciInfo_t)
CHECK_FIELD(nvmlPciInfo_t, busIdLegacy)
CHECK_FIELD(nvmlPciInfo_t, domain)
CHECK_FIELD(nvmlPciInfo_t, bus)
CHECK_FIELD(nvmlPciInfo_t, device)
CHECK_FIELD(nvmlPciInfo_t, pciDeviceId)
CHECK_FIELD(nvmlPciInfo_t, pciSubSystemId)
CHECK_FIELD(nvmlPciInfo_t, busId)

CHECK_STRUCT(nvmlValue_t)
CHECK_FIELD(nvmlValue_t, dVal)
CHECK_FIELD(nvmlValue_t, uiVal)
CHECK_FIELD(nvmlValue_t, ulVal)
CHECK_FIELD(nvmlValue_t, ullVal)
CHECK_FIELD(nvmlValue_t, sllVal)
CHECK_FIELD(nvmlValue_t, siVal)
CHECK_FIELD(nvmlValue_t, usVal)

CHECK_STRUCT(nvmlFieldValue_t)
CHECK_FIELD(nvmlFieldValue_t, fieldId)
CHECK_FIELD(nvmlFieldValue_t, scopeId)
CHECK_FIELD(nvmlFieldValue_t, timestamp)
CHECK_FIELD(nvmlFieldValue_t, latencyUsec)
CHECK_FIELD(nvmlFieldValue_t, valueType)
CHECK_FIELD(nvmlFieldValue_t, nvmlReturn)
static_assert(offsetof(gs::nvmlFieldValue_t, value) == offsetof(::nvmlFieldValue_t, value));
#undef CHECK_STRUCT
#undef CHECK_FIELD

}  // namespace
#endif  // GEARSHIFT_HAVE_NVML_H

namespace {

TEST(NvmlAbi, DeclarationsMatchNvmlHeader) {
#if GEARSHIFT_HAVE_NVML_H
  SUCCEED() << "checked at compile time against " << GEARSHIFT_NVML_H_DIR << "/nvml.h";
#else
  GTEST_SKIP() << "nvml.h not found at configure time (set GEARSHIFT_NVML_INCLUDE_DIR to a folder holding it): "
                  "gpu/nvml_api.hpp is not checked against NVIDIA's header in this build";
#endif
}

// The simulated GPU stands in for NVML only if it exports every function the wrapper resolves.
TEST(NvmlAbi, SimulatedGpuExportsTheList) {
  void* dl = dlopen(GEARSHIFT_SIMGPU_PATH, RTLD_NOW | RTLD_LOCAL);
  ASSERT_NE(dl, nullptr) << dlerror();
#define CHECK_EXPORT(name, ret, params) \
  EXPECT_NE(dlsym(dl, #name), nullptr) << #name " is not exported by the simulated GPU";
  GEARSHIFT_NVML_FUNCTIONS(CHECK_EXPORT)
#undef CHECK_EXPORT
  dlclose(dl);
}

}  // namespace
