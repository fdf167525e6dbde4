// The distinct measured sweeps of a stage profile (profile.hpp: Perseus or gearshift dialect), as the DVFS
// model's samples: what the model's validation against the Perseus (SOSP'24) A100 sweeps fits and predicts
// (bench/model_validation.cpp, docs/model-validation.md). Measured data (Perseus authors, Apache-2.0).
#pragma once

#include <string>
#include <vector>

#include "model/fit.hpp"
#include "pipeline/profile.hpp"

namespace gearshift::pipeline {

// One distinct (stage, instruction) sweep. Stages with identical rows are merged (shared/data/perseus/README.md
// §2.1: stages 0–6 of the A100 files are byte-identical copies of one profiled stage), so each physical
// measurement counts once.
struct ProfileGroup {
  std::vector<int> stages;  // ascending
  Instruction instruction = Instruction::kForward;
  std::vector<model::Sample> samples;  // ascending SM clock; mem_mhz = the memory clock given to distinct_groups
  std::string label() const;           // e.g. "stages 0-6 forward", "stage 7 backward"
};

// Groups in order of (first stage, forward, backward, recompute). `mem_mhz`: the memory clock of the sweep (the
// CSV has none; A100 has one, 1593 MHz).
std::vector<ProfileGroup> distinct_groups(const Profile& profile, int mem_mhz);

}  // namespace gearshift::pipeline
