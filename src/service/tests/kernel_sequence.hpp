// Synthetic traces for the service tests: kernels one after another on stream 7, each launched 50 µs (or a given
// lead) before it starts (the CPU ahead of the GPU), correlation ids in launch order.
#pragma once

#include <cstdint>

#include "trace/record.hpp"

namespace gearshift::service::testing {

class KernelSequence {
 public:
  explicit KernelSequence(trace::Trace& t, std::int64_t start_ns = 1'000'000) : t_(t), now_(start_ns) {}
  // Appends kernel `name_id` of `duration_ns` at the current time, launched `lead_ns` before it, and moves the time
  // past it and `gap_ns`.
  void kernel(std::uint32_t name_id, std::int64_t duration_ns, std::int64_t gap_ns = 0, std::int64_t lead_ns = 50'000) {
    trace::OpRecord r;
    r.name_id = name_id;
    r.start_ns = now_;
    r.duration_ns = duration_ns;
    r.stream = 7;
    r.correlation = corr_++;
    r.launch_ns = now_ - lead_ns;
    t_.ops.push_back(r);
    now_ += duration_ns + gap_ns;
  }
  void idle(std::int64_t ns) { now_ += ns; }

 private:
  trace::Trace& t_;
  std::int64_t now_;
  std::int64_t corr_ = 1;
};

}  // namespace gearshift::service::testing
