// One measured run of a pipeline clock plan, as the Perseus artifact records it (`N.prof.json`, MEASURED with
// CUDA-synchronised timers and NVML energy): `[{"rank": r, "iter_time": [s per iteration], "iter_energy": [J per
// iteration, this rank's GPU], "time_breakdown": {"forward": [[s per microbatch] per iteration], "backward": …,
// "load": …}}]` (../shared/data/perseus_measured/README.md). The first iteration is warm-up and is dropped; every
// figure here is the mean over the others.
//
// `load` lists the LoadMicroBatch times of the ranks that load (first and last of Merak's pipeline; a rank that loads
// nothing lists ~10 us entries); k·M entries per iteration are read as k loads per microbatch, summed per
// microbatch. A load runs on its rank right before that microbatch's forward (merak_order.hpp), so it is counted as
// part of that forward's time wherever these runs are put on the graph.
#pragma once

#include <string>
#include <vector>

namespace gearshift::pipeline {

struct MeasuredRank {
  double iteration_s = 0;         // mean iteration time [s], MEASURED
  double energy_j = 0;            // mean energy of this rank's GPU per iteration [J], MEASURED
  std::vector<double> forward_s;  // [microbatch] mean forward time [s], load excluded
  std::vector<double> backward_s; // [microbatch] mean backward time [s] (activation recompute included)
  std::vector<double> load_s;     // [microbatch] mean load time before that forward [s] (0 when none listed)
};

struct MeasuredRun {
  std::string source;  // file, for messages
  int microbatches = 0;
  int iterations = 0;  // iterations averaged (the first dropped)
  std::vector<MeasuredRank> ranks;
  double iteration_s() const;  // mean over ranks [s]
  double energy_j() const;     // sum over ranks [J]
};

// Throws PipelineError naming `source` and the place on: not a JSON array, a missing or non-numeric field
// (rank, iter_time, iter_energy, time_breakdown.forward/backward), fewer than 2 iterations, a rank missing or
// repeated, lists of different lengths, a forward/backward count that differs between iterations or ranks, a
// negative, NaN or infinite time or energy.
MeasuredRun parse_measured_run(const std::string& json_text, const std::string& source);

}  // namespace gearshift::pipeline
