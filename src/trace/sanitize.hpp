// Timing rules applied to every imported trace before iteration detection (docs/step-detection.md, "Timing
// rules"). Each rule fixes or flags one kind of impossible timing seen in real exports, counts what it did in
// Trace::health and says it in plain words in Trace::health.warnings:
//
//   zero-time events   GPU ops and step markers with ts 0 and dur 0 (Kineto's export bug, kineto#109,
//                      pytorch#188481) are dropped: they are never part of a step or of the trace's span.
//   exact duplicates   an op equal to another in kind, name, start, duration, device, stream and correlation
//                      (an exporter writing an event twice) is dropped; so is a repeated step marker.
//   stream overruns    kernels of one stream run one after another, so an op that ends more than
//                      kOverrunToleranceNs after its stream successor starts has an impossible duration (a
//                      captured hang, a bad clock conversion). It is marked OpRecord::suspect; detection leaves
//                      the step holding it out of the template. When more than kMaxOverrunShare of a stream's
//                      ops overlap, the trace's stream ids are not real streams and the rule is not applied.
//   step markers       a marker whose end overlaps the next marker by less than half of either's length is
//                      cut at the next one's start (a late end); larger overlaps are parallel ranges (two
//                      processes merged in one file) and stay; zero-length markers are dropped (collapsed).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "trace/record.hpp"

namespace gearshift::trace {

inline constexpr std::int64_t kOverrunToleranceNs = 10'000;  // timestamps of one stream may touch within 10 µs
inline constexpr double kMaxOverrunShare = 0.01;             // above 1 % overlapping ops the stream ids are not streams

// Applies the rules above in place. Idempotent: a second call changes and counts nothing. Keeps ops and
// markers sorted by start.
void sanitize_trace(Trace& trace);

// A trace whose median kernel is shorter than kMinMedianKernelNs has its times in another unit (milliseconds
// read as Chrome's microseconds: GPT-2's 805 kernels a step in 85 µs, planned). The median kernel of the traces
// in ../shared/data (H200, V100, A100, RTX 2080 Ti; training, decode, inference) lies at 2-194 µs, the shortest
// kernels at about 1 µs. Throws TraceError naming `path`; traces of fewer than kTimeUnitMinKernels kernels pass.
inline constexpr std::int64_t kMinMedianKernelNs = 300;
inline constexpr std::size_t kTimeUnitMinKernels = 100;
void check_time_unit(const Trace& trace, const std::string& path);

}  // namespace gearshift::trace
