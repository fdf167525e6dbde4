// CUPTI activity records -> plain records (activity.hpp). The only code that reads CUPTI record layouts.
//
// Layouts: CUDA 13's CUPTI (API version >= 130000) hands CUpti_ActivityKernel10, Memcpy6, Memset4, Marker2.
// CUDA 12's CUPTI hands older versions of these structs whose leading fields (up to the kernel's name and the
// copies' correlation id) sit at the same offsets; for those only the leading fields are read and graph ids
// are left 0.
#pragma once

#include <cupti.h>

#include <string>
#include <variant>

#include "cupti/activity.hpp"

namespace gearshift::cupti {

using Decoded = std::variant<std::monostate, GpuActivity, MarkerActivity>;

// `label` is scratch storage that memcpy/memset names point into; it must outlive the use of the result.
// Record kinds the tracer does not use decode to monostate.
Decoded decode_record(const CUpti_Activity* record, bool v13_layout, std::string& label);

}  // namespace gearshift::cupti
