// Step variants: blocks of ops that some steps of a job run and others do not.
//
// A training step is not always the same kernel sequence. Megatron-LM clips gradients only when their norm
// exceeds the threshold: its GPT iterations launch 2,806 kernels, or 3,098 with the clipping block (H200,
// bench/results/2026-12-01-step-contract-moe-megatron-compile.md), and which one the template holds depends on the run.
// A block that long is far beyond what the runtime's predictor absorbs as inserted or missing kernels
// (runtime/predictor.hpp), so it lost lock in every iteration of the other variant (live prediction 79.6 %, with the
// default clocks while searching). This finds such blocks by aligning every whole step's op sequence to the template's
// (trace/sequence_align.hpp), so the predictor can follow them as optional blocks (docs/runtime.md, "Step variants").
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "trace/iteration.hpp"
#include "trace/record.hpp"

namespace gearshift::trace {

// One block: in the steps that ran it, `ops` ran after template position `after` (-1: before the first position)
// in place of the `skip` template positions after it (after + 1 .. after + skip). An insertion has skip 0, a skip
// no ops; both is an alternative: cub's radix sort is one kernel or eight ops by the step's token count (an MoE's
// expert index sort, bench/results/2026-12-03-abba-moe.md, session 18), so a step runs one where the template holds the
// other.
struct StepVariant {
  std::int64_t after = -1;
  std::vector<std::pair<std::string, OpKind>> ops;  // ops run there, in launch order; empty for a skip
  std::size_t skip = 0;                             // template positions left out; 0 for an insertion
  std::size_t steps = 0;                            // whole steps of the trace that ran it so
};

struct StepVariantOptions {
  // A block is kept when at least this many steps ran it, identically and at the same place: once is chance
  // (a one-off logging step), twice is a pattern the live run will see again.
  std::size_t min_steps = 2;
  // Blocks shorter than this (inserted plus left-out ops) are left to the predictor's own insertion and skip
  // handling (it absorbs up to 11 inserted and 16 missing launches, runtime/predictor.hpp). They are mostly not
  // variants at all: ops of two streams that start in another order than the template's (Megatron-LM: 315 such
  // 1-2 op blocks per step).
  std::size_t min_ops = 8;
  // An alternative is kept from this many ops (both forms together): other ops in the place of template
  // positions are a pattern, not two streams' order. One op for one other is the predictor's substitution.
  // The MoE's radix sort as the live feed sees it (kernels only) is one kernel or four: with min_ops, dropped
  // (H200, session 18: 97.3 % of launches expected, live and replayed; 99.2 % kept).
  std::size_t min_alternative_ops = 3;
  // At most this many blocks (the most frequent first, then the longest) and this many inserted ops in all,
  // relative to the template's size: routing noise (an MoE's experts) must not bloat what the predictor follows.
  std::size_t max_variants = 64;
  double max_inserted_share = 0.5;
  // A step that differs from the template in more ops than this share of the template's positions is another
  // step, not a variant of this one: it contributes nothing.
  double max_edit_share = 0.5;
};

// The variants of the analysed device's whole steps against the template (`a` from detect_iterations on `t`).
// A step's ops are the device's ops that start inside it, in start order (the template's order). Graph ops are
// not compared (a graph launch is one unit for the runtime): steps of a template with graph ops yield none.
// Sorted by `after`, then by `skip` (insertions first).
std::vector<StepVariant> step_variants(const Trace& t, const IterationAnalysis& a, const StepVariantOptions& o = {});

}  // namespace gearshift::trace
