// The instruction stream of one rank under Merak's synchronous 1F1B schedule (`MergeP2PTrainSchedule`, the
// DeepSpeed "PipeDream-flush" schedule with merged send/receive pairs), as the Perseus artifact ran it.
//
// Perseus's sched.json gives one SM clock per entry of this stream, compute and non-compute alike; this order
// tells which entries are forward and backward computations (and of which microbatch). The stream has
// 2·(M + S − 1) steps; on step k rank s runs a forward when k and s have the same parity, else a backward, of
// microbatch (forward) k/2 − s/2, (backward) k/2 − S + (s+1)/2 for even k, (k−1)/2 − S + 1 + s/2 for odd k (integer
// division; a step whose microbatch is outside 0..M−1 computes nothing). Each step first exchanges with the
// neighbour (one merged command where both directions are due), then loads a microbatch (first and last rank,
// forward steps), then computes; the last step ends with ReduceTiedGrads, ReduceGrads, OptimizerStep.
// Lengths: 4·M + 6, 4·M + 8, 4·M + 6, 4·M + 4 entries on the ranks of a 4-stage pipeline (518/520/518/516 for
// M = 128, the Perseus README's check).
#pragma once

#include <cstddef>
#include <optional>
#include <vector>

#include "pipeline/profile.hpp"

namespace gearshift::pipeline {

enum class MerakCommand {
  kLoadMicroBatch,
  kForwardPass,
  kBackwardPass,
  kSendActivation,
  kRecvActivation,
  kSendGrad,
  kRecvGrad,
  kSendActivationRecvGrad,
  kSendGradRecvActivation,
  kReduceTiedGrads,
  kReduceGrads,
  kOptimizerStep,
};
const char* merak_command_name(MerakCommand c);

struct MerakEntry {
  MerakCommand command = MerakCommand::kLoadMicroBatch;
  int microbatch = -1;  // the computed microbatch of a ForwardPass/BackwardPass; −1 for the others
};

// Rank `stage`'s stream for `stages` ranks and `microbatches` microbatches (all ≥ 1, stage < stages).
std::vector<MerakEntry> merak_1f1b_stream(int stages, int microbatches, int stage);

// The microbatch count whose stream on `stage` has exactly `length` entries; nullopt when none has.
std::optional<int> merak_microbatches_for_length(int stages, int stage, std::size_t length);

}  // namespace gearshift::pipeline
