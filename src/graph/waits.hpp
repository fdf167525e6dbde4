// What each op's free float waits for (issue 46: a saving that spends a wait rests on the wait being real).
//
// An op's free float (step_graph.hpp, free_float_ns) ends where the first thing after it would move: its stream's
// next op, an op on another stream waiting for it, or a synchronize awaiting it. The kind of the float is why that
// successor started when it did on the replayed step:
// - launch_bound: it waited for its launch, the CPU's own time (what a profiler inflates; a DataLoader's input
//   wait is CPU time too and shows here: the trace formats do not say which CPU time is input), or a synchronize
//   awaiting the op was reached late by the CPU;
// - synchronize: it is the first launch after a synchronize that waited for the GPU (the GPU drained its queue
//   while the CPU waited, then waited for the CPU's next launch);
// - cross_stream / collective: it waited for an op on another stream (collective when either is communication,
//   e.g. the NCCL stream waiting for the gradients' last kernel);
// - none: the successor followed on its stream back to back (no float).
#pragma once

#include <array>
#include <cstdint>
#include <string_view>
#include <vector>

#include "graph/step_graph.hpp"

namespace gearshift::graph {

enum class WaitKind : std::uint8_t { none, launch_bound, synchronize, cross_stream, collective };
inline constexpr std::size_t kWaitKinds = 5;
inline constexpr std::array<WaitKind, 4> kWaitKindsShown = {WaitKind::launch_bound, WaitKind::synchronize,
                                                            WaitKind::cross_stream, WaitKind::collective};

// "launch-bound", "synchronize", "cross-stream", "collective", "none".
std::string_view to_string(WaitKind k);
// The JSON key: "launch_bound", "synchronize", "cross_stream", "collective", "none".
std::string_view json_key(WaitKind k);

struct OpWait {
  double float_ns = 0;              // free float, ns (= free_float_ns)
  WaitKind kind = WaitKind::none;   // what the successor that ends it waited for; none where float_ns is 0
  // Where the op has no float because its stream's next op (this step) follows it back to back, and that op alone
  // binds it: that op's position (the chain of back-to-back ops shares the float at its end, up to `chain_cap_ns`,
  // the least float of the op's other successors, ns; +inf: none). -1 otherwise.
  std::int32_t chain_next = -1;
  double chain_cap_ns = 0;
};

// Per position of `t` (a replay of `g`, e.g. replay_fixed): its free float and the kind of wait it lies in.
// `communication`: per position, the op is a collective (model::KernelClass::communication). Throws
// std::invalid_argument when the sizes disagree or `g` is not a dependency graph.
std::vector<OpWait> waits_after(const StepGraph& g, const StepTiming& t, const std::vector<std::uint8_t>& communication);

}  // namespace gearshift::graph
