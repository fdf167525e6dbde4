// The instruction DAG of one pipeline-parallel training iteration.
//
// Operations: forward F, backward B and (when profiled) recompute R, one per (rank, model chunk, microbatch).
// Edges are finish-to-start with zero lag (no P2P time, as in Perseus SOSP'24 §4 / data README §3.2):
//  1. execution order on each rank (one instruction at a time per GPU);
//  2. forward data flow F(vs, m) → F(vs+1, m) over virtual stages vs = chunk·S + rank;
//  3. backward data flow B(vs+1, m) → B(vs, m), and F(last, m) → B(last, m) (or → R(last, m));
//  4. R(vs, m) → B(vs, m) (R sits right before its B in the rank's order; it needs no gradient).
// Per-rank orders:
//  * GPipe: all forwards F0..F(M−1), then backwards in reverse, B(M−1)..B0.
//  * 1F1B (DeepSpeed/Megatron "PipeDream-flush"): w = min(S−1−s, M) warm-up forwards, then F(w+k), B(k)
//    pairs, then the cool-down backwards.
//  * Interleaved 1F1B (Megatron-LM, Narayanan et al. SC'21) with v chunks per rank; needs M % S == 0.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "pipeline/profile.hpp"

namespace gearshift::pipeline {

enum class PipelineSchedule { kGPipe, k1F1B, kInterleaved1F1B };
PipelineSchedule parse_schedule(const std::string& name);  // "gpipe", "1f1b", "interleaved"; throws PipelineError
const char* schedule_name(PipelineSchedule s);

struct DagOp {
  int rank = 0;
  int chunk = 0;
  int microbatch = 0;
  Instruction instruction = Instruction::kForward;
};

struct PipelineDag {
  int stages = 0, microbatches = 0, chunks = 1;
  std::vector<DagOp> ops;
  std::vector<std::vector<int>> rank_order;  // [rank] -> op indices in execution order
  std::vector<std::pair<int, int>> edges;    // (u, v): v starts after u finishes; deduplicated
};

// Throws PipelineError on stages < 1, microbatches < 1, chunks < 1, chunks > 1 without interleaving, or an
// interleaved schedule with microbatches % stages != 0.
PipelineDag build_dag(PipelineSchedule schedule, int stages, int microbatches, int chunks, bool recompute);

}  // namespace gearshift::pipeline
