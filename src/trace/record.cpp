#include "trace/record.hpp"

#include <algorithm>

namespace gearshift::trace {

const char* to_string(OpKind k) {
  switch (k) {
    case OpKind::kernel: return "kernel";
    case OpKind::memcpy: return "memcpy";
    case OpKind::memset: return "memset";
  }
  return "kernel";
}

const char* to_string(SyncRecord::Scope s) {
  switch (s) {
    case SyncRecord::Scope::device: return "device";
    case SyncRecord::Scope::stream: return "stream";
    case SyncRecord::Scope::event: return "event";
  }
  return "device";
}

std::size_t Trace::kernel_count() const {
  return static_cast<std::size_t>(
      std::count_if(ops.begin(), ops.end(), [](const OpRecord& r) { return r.kind == OpKind::kernel; }));
}

}  // namespace gearshift::trace
