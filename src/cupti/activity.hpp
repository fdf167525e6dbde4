// Plain activity records: what the CUPTI layer decodes its records into, and what the tracer core consumes.
// No CUPTI type appears here, so the core (correlation, buffering, clocks, file writing) is tested with fake
// records on machines without CUDA.
#pragma once

#include <array>
#include <cstdint>
#include <string_view>

#include "trace/record.hpp"

namespace gearshift::cupti {

// One kernel, memcpy or memset as the GPU ran it. Timestamps in ns on CUPTI's clock (cuptiGetTimestamp).
struct GpuActivity {
  trace::OpKind kind = trace::OpKind::kernel;
  std::string_view name;               // kernels: mangled name as CUPTI gives it; copies: a label
  std::int64_t start_ns = 0;           // GPU start, ns
  std::int64_t end_ns = 0;             // GPU end, ns
  std::uint32_t device = 0;            // CUDA device ordinal
  std::uint32_t stream = 0;            // CUPTI stream id
  std::uint32_t correlation = 0;       // launch correlation id (0: unknown)
  std::array<std::int32_t, 3> grid{0, 0, 0};
  std::array<std::int32_t, 3> block{0, 0, 0};
  std::int32_t registers_per_thread = 0;
  std::int32_t shared_memory_bytes = 0;  // static + dynamic, bytes
  std::int64_t bytes = 0;              // memcpy / memset size, bytes
  std::uint32_t graph_id = 0;          // CUDA graph id when launched inside a graph, else 0
};

// One NVTX marker record. Push/pop and start/end ranges arrive as a start and an end record with the same id;
// only the start record carries the name.
struct MarkerActivity {
  enum class Phase : std::uint8_t { instant, start, end };
  Phase phase = Phase::instant;
  std::uint32_t id = 0;
  std::int64_t timestamp_ns = 0;  // CPU time, ns on CUPTI's clock
  std::string_view name;          // empty on end records
};

}  // namespace gearshift::cupti
