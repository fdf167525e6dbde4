#include "cupti/activity_decode.hpp"

#include "cupti/tracer.hpp"

namespace gearshift::cupti {
namespace {

std::int64_t ns(uint64_t t) { return static_cast<std::int64_t>(t); }

}  // namespace

Decoded decode_record(const CUpti_Activity* record, bool v13_layout, std::string& label) {
  if (record == nullptr) return std::monostate{};
  switch (record->kind) {
    case CUPTI_ACTIVITY_KIND_KERNEL:
    case CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL: {
      const auto* k = reinterpret_cast<const CUpti_ActivityKernel10*>(record);
      GpuActivity a;
      a.kind = trace::OpKind::kernel;
      a.name = k->name != nullptr ? std::string_view(k->name) : std::string_view("<unnamed kernel>");
      a.start_ns = ns(k->start);
      a.end_ns = ns(k->end);
      a.device = k->deviceId;
      a.stream = k->streamId;
      a.correlation = k->correlationId;
      a.grid = {k->gridX, k->gridY, k->gridZ};
      a.block = {k->blockX, k->blockY, k->blockZ};
      a.registers_per_thread = k->registersPerThread;
      a.shared_memory_bytes = k->staticSharedMemory + k->dynamicSharedMemory;
      if (v13_layout) a.graph_id = k->graphId;
      return a;
    }
    case CUPTI_ACTIVITY_KIND_MEMCPY: {
      const auto* m = reinterpret_cast<const CUpti_ActivityMemcpy6*>(record);
      label = memcpy_label(m->copyKind, m->srcKind, m->dstKind);
      GpuActivity a;
      a.kind = trace::OpKind::memcpy;
      a.name = label;
      a.start_ns = ns(m->start);
      a.end_ns = ns(m->end);
      a.device = m->deviceId;
      a.stream = m->streamId;
      a.correlation = m->correlationId;
      a.bytes = static_cast<std::int64_t>(m->bytes);
      if (v13_layout) a.graph_id = m->graphId;
      return a;
    }
    case CUPTI_ACTIVITY_KIND_MEMSET: {
      const auto* m = reinterpret_cast<const CUpti_ActivityMemset4*>(record);
      label = memset_label(m->memoryKind);
      GpuActivity a;
      a.kind = trace::OpKind::memset;
      a.name = label;
      a.start_ns = ns(m->start);
      a.end_ns = ns(m->end);
      a.device = m->deviceId;
      a.stream = m->streamId;
      a.correlation = m->correlationId;
      a.bytes = static_cast<std::int64_t>(m->bytes);
      if (v13_layout) a.graph_id = m->graphId;
      return a;
    }
    case CUPTI_ACTIVITY_KIND_MARKER: {
      const auto* m = reinterpret_cast<const CUpti_ActivityMarker2*>(record);
      MarkerActivity a;
      a.id = m->id;
      a.timestamp_ns = ns(m->timestamp);
      if ((m->flags & CUPTI_ACTIVITY_FLAG_MARKER_START) != 0) a.phase = MarkerActivity::Phase::start;
      else if ((m->flags & CUPTI_ACTIVITY_FLAG_MARKER_END) != 0) a.phase = MarkerActivity::Phase::end;
      else if ((m->flags & CUPTI_ACTIVITY_FLAG_MARKER_INSTANTANEOUS) != 0) a.phase = MarkerActivity::Phase::instant;
      else return std::monostate{};
      if (m->name != nullptr) a.name = m->name;
      return a;
    }
    default:
      return std::monostate{};
  }
}

}  // namespace gearshift::cupti
