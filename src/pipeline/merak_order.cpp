#include "pipeline/merak_order.hpp"

namespace gearshift::pipeline {

const char* merak_command_name(MerakCommand c) {
  switch (c) {
    case MerakCommand::kLoadMicroBatch: return "LoadMicroBatch";
    case MerakCommand::kForwardPass: return "ForwardPass";
    case MerakCommand::kBackwardPass: return "BackwardPass";
    case MerakCommand::kSendActivation: return "SendActivation";
    case MerakCommand::kRecvActivation: return "RecvActivation";
    case MerakCommand::kSendGrad: return "SendGrad";
    case MerakCommand::kRecvGrad: return "RecvGrad";
    case MerakCommand::kSendActivationRecvGrad: return "SendActivationRecvGrad";
    case MerakCommand::kSendGradRecvActivation: return "SendGradRecvActivation";
    case MerakCommand::kReduceTiedGrads: return "ReduceTiedGrads";
    case MerakCommand::kReduceGrads: return "ReduceGrads";
    case MerakCommand::kOptimizerStep: return "OptimizerStep";
  }
  return "?";
}

std::vector<MerakEntry> merak_1f1b_stream(int S, int M, int s) {
  std::vector<MerakEntry> out;
  if (S < 1 || M < 1 || s < 0 || s >= S) return out;
  auto in_range = [M](int m) { return m >= 0 && m < M; };
  const bool has_prev = s > 0, has_next = s + 1 < S;
  const int steps = 2 * (M + S - 1);
  int prev = -1;  // microbatch of the previous step (may be out of range)
  for (int k = 0; k < steps; ++k) {
    const bool forward = (k % 2) == (s % 2);
    int m;
    if (forward) m = k / 2 - s / 2;  // (k−1)/2 equals k/2 for odd k
    else if (k % 2 == 0) m = k / 2 - S + (s + 1) / 2;
    else m = (k - 1) / 2 - S + 1 + s / 2;
    auto add = [&](MerakCommand c) { out.push_back({c, -1}); };
    // The exchange with the previous (forward steps) or next (backward steps) rank: what the previous step
    // produced goes out, what this step needs comes in, merged into one command when both are due.
    if (forward && has_prev) {
      if (in_range(m)) add(in_range(prev) ? MerakCommand::kSendGradRecvActivation : MerakCommand::kRecvActivation);
      else if (in_range(prev)) add(MerakCommand::kSendGrad);
    } else if (!forward && has_next) {
      if (in_range(prev)) add(in_range(m) ? MerakCommand::kSendActivationRecvGrad : MerakCommand::kSendActivation);
      else if (in_range(m)) add(MerakCommand::kRecvGrad);
    }
    if ((s == 0 || s == S - 1) && forward && in_range(m)) add(MerakCommand::kLoadMicroBatch);
    if (in_range(m)) out.push_back({forward ? MerakCommand::kForwardPass : MerakCommand::kBackwardPass, m});
    if (k == steps - 1) {
      add(MerakCommand::kReduceTiedGrads);
      add(MerakCommand::kReduceGrads);
      add(MerakCommand::kOptimizerStep);
    }
    prev = m;
  }
  return out;
}

std::optional<int> merak_microbatches_for_length(int S, int s, std::size_t length) {
  // The stream grows with M (4 entries per microbatch): walk M up until it reaches the length.
  for (int M = 1; M <= static_cast<int>(length); ++M) {
    const std::size_t n = merak_1f1b_stream(S, M, s).size();
    if (n == length) return M;
    if (n > length) break;
  }
  return std::nullopt;
}

}  // namespace gearshift::pipeline
