#include "pipeline/dag.hpp"

#include <algorithm>
#include <map>
#include <tuple>

#include <fmt/core.h>

#include "pipeline/error.hpp"

namespace gearshift::pipeline {

PipelineSchedule parse_schedule(const std::string& name) {
  if (name == "gpipe") return PipelineSchedule::kGPipe;
  if (name == "1f1b") return PipelineSchedule::k1F1B;
  if (name == "interleaved" || name == "interleaved-1f1b") return PipelineSchedule::kInterleaved1F1B;
  throw PipelineError(fmt::format("--schedule: unknown schedule '{}' (gpipe, 1f1b, interleaved)", name));
}

const char* schedule_name(PipelineSchedule s) {
  switch (s) {
    case PipelineSchedule::kGPipe: return "gpipe";
    case PipelineSchedule::k1F1B: return "1f1b";
    case PipelineSchedule::kInterleaved1F1B: return "interleaved";
  }
  return "?";
}

namespace {

// One entry of a rank's program: (forward?, chunk, microbatch).
struct Step {
  bool forward;
  int chunk;
  int microbatch;
};

std::vector<Step> rank_program(PipelineSchedule sch, int S, int M, int v, int s) {
  std::vector<Step> prog;
  if (sch == PipelineSchedule::kGPipe) {
    for (int m = 0; m < M; ++m) prog.push_back({true, 0, m});
    for (int m = M - 1; m >= 0; --m) prog.push_back({false, 0, m});
    return prog;
  }
  // Megatron-style virtual microbatch k -> (chunk, microbatch); v = 1 gives plain 1F1B.
  const int total = M * v;
  auto chunk_of = [&](int k, bool fwd) {
    int c = (k % (S * v)) / S;
    return fwd ? c : v - 1 - c;
  };
  auto mb_of = [&](int k) { return (k / (S * v)) * S + k % S; };
  int warmup;
  if (v == 1) warmup = std::min(S - 1 - s, M);
  else if (M == S) warmup = total;
  else warmup = std::min((S - s - 1) * 2 + (v - 1) * S, total);
  auto F = [&](int k) { prog.push_back({true, chunk_of(k, true), v == 1 ? k : mb_of(k)}); };
  auto B = [&](int k) { prog.push_back({false, chunk_of(k, false), v == 1 ? k : mb_of(k)}); };
  for (int k = 0; k < warmup; ++k) F(k);
  for (int k = 0; k < total - warmup; ++k) {
    F(warmup + k);
    B(k);
  }
  for (int k = total - warmup; k < total; ++k) B(k);
  return prog;
}

}  // namespace

PipelineDag build_dag(PipelineSchedule sch, int S, int M, int v, bool recompute) {
  if (S < 1) throw PipelineError("--stages must be ≥ 1");
  if (M < 1) throw PipelineError("--microbatches must be ≥ 1");
  if (v < 1) throw PipelineError("--virtual-stages must be ≥ 1");
  if (v > 1 && sch != PipelineSchedule::kInterleaved1F1B)
    throw PipelineError("--virtual-stages > 1 needs --schedule interleaved");
  if (sch == PipelineSchedule::kInterleaved1F1B && M % S != 0)
    throw PipelineError(fmt::format("--schedule interleaved needs --microbatches ({}) to be a multiple of --stages ({})", M, S));
  PipelineDag g;
  g.stages = S;
  g.microbatches = M;
  g.chunks = v;
  g.rank_order.resize(S);
  // (instruction, virtual stage, microbatch) -> op index
  std::map<std::tuple<int, int, int>, int> index;
  for (int s = 0; s < S; ++s) {
    for (const Step& st : rank_program(sch, S, M, v, s)) {
      auto add = [&](Instruction ins) {
        int id = static_cast<int>(g.ops.size());
        g.ops.push_back({s, st.chunk, st.microbatch, ins});
        g.rank_order[s].push_back(id);
        index[{static_cast<int>(ins), st.chunk * S + s, st.microbatch}] = id;
      };
      if (st.forward) {
        add(Instruction::kForward);
      } else {
        if (recompute) add(Instruction::kRecompute);
        add(Instruction::kBackward);
      }
    }
  }
  std::vector<std::pair<int, int>> e;
  for (const auto& order : g.rank_order)
    for (std::size_t k = 1; k < order.size(); ++k) e.emplace_back(order[k - 1], order[k]);
  const int V = S * v;
  auto id = [&](Instruction ins, int vs, int m) { return index.at({static_cast<int>(ins), vs, m}); };
  for (int m = 0; m < M; ++m) {
    for (int vs = 0; vs + 1 < V; ++vs) {
      e.emplace_back(id(Instruction::kForward, vs, m), id(Instruction::kForward, vs + 1, m));
      e.emplace_back(id(Instruction::kBackward, vs + 1, m), id(Instruction::kBackward, vs, m));
    }
    e.emplace_back(id(Instruction::kForward, V - 1, m),
                   id(recompute ? Instruction::kRecompute : Instruction::kBackward, V - 1, m));
    if (recompute)
      for (int vs = 0; vs < V; ++vs) e.emplace_back(id(Instruction::kRecompute, vs, m), id(Instruction::kBackward, vs, m));
  }
  std::sort(e.begin(), e.end());
  e.erase(std::unique(e.begin(), e.end()), e.end());
  g.edges = std::move(e);
  return g;
}

}  // namespace gearshift::pipeline
