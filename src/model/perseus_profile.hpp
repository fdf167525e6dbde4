// Reader for the Perseus (SOSP'24) stage profiles: ../shared/data/perseus/stage_profile/<model>+<gpu>_bf16.csv,
// format in shared/data/perseus/README.md §2.1: header "stage,instruction,frequency,time,energy", one row per
// (pipeline stage, instruction, locked SM clock in MHz) with the mean time (s) and energy (J) of one instruction
// on one GPU. Measured data (Perseus authors, Apache-2.0).
#pragma once

#include <string>
#include <vector>

#include "model/fit.hpp"

namespace gearshift::model {

struct ProfileRow {
  int stage = 0;
  std::string instruction;  // "forward" or "backward"
  int sm_mhz = 0;           // MHz
  double time_s = 0;        // s
  double energy_j = 0;      // J
};

// Parse the CSV text; `origin` names the file in errors. Throws std::invalid_argument with the line number on
// a bad header, a wrong column count, or a field that is not a number.
std::vector<ProfileRow> parse_perseus_profile(const std::string& text, const std::string& origin);
std::vector<ProfileRow> read_perseus_profile(const std::string& path);  // throws std::runtime_error if unreadable

// One distinct (stage, instruction) sweep. Stages with identical rows are merged (README §2.1: stages 0–6 of
// the A100 files are byte-identical copies of one profiled stage), so each physical measurement counts once.
struct ProfileGroup {
  std::vector<int> stages;  // ascending
  std::string instruction;
  std::vector<Sample> samples;  // ascending SM clock; mem_mhz = the memory clock given to distinct_groups
  std::string label() const;    // e.g. "stages 0-6 forward", "stage 7 backward"
};

// Groups in order of (first stage, forward before backward). `mem_mhz`: the memory clock of the sweep (the
// CSV has none; A100 has one, 1593 MHz).
std::vector<ProfileGroup> distinct_groups(const std::vector<ProfileRow>& rows, int mem_mhz);

}  // namespace gearshift::model
