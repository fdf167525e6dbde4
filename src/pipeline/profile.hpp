// Per-stage instruction profiles: measured (SM clock, time, energy) of one pipeline instruction.
//
// Two CSV dialects are read, told apart by their header (columns may come in any order):
//  * Perseus (Chung et al., SOSP'24) `stage,instruction,frequency,time,energy`:
//    frequency = locked SM clock [MHz], time = wall time of ONE instruction (one microbatch) on ONE GPU [s],
//    energy = that instruction's energy on that GPU [J].
//  * gearshift's own format, written by tools that derive profiles from traces:
//        # gearshift pipeline profile v1      (optional comment lines start with '#')
//        stage,instruction,sm_clock_mhz,time_s,energy_j[,samples]
//    Same meaning with the units in the column names; `samples` (optional, integer ≥ 1) is how many
//    measured instructions were averaged and is informational only.
// instruction is `forward`, `backward` or `recompute` (activation recomputation before a backward).
// For interleaved 1F1B, `stage` is the rank (GPU) and a row describes one model chunk on that rank.
#pragma once

#include <string>
#include <vector>

namespace gearshift::pipeline {

enum class Instruction { kForward = 0, kBackward = 1, kRecompute = 2 };
inline constexpr int kNumInstructions = 3;
const char* instruction_name(Instruction i);

struct ProfileRow {
  int stage = 0;
  Instruction instruction = Instruction::kForward;
  int sm_clock_mhz = 0;
  double time_s = 0;    // one instruction, one GPU [s]
  double energy_j = 0;  // one instruction, one GPU [J]
  int line = 0;         // 1-based line in the source file, for messages
};

struct Profile {
  std::string source;  // file name, for messages
  std::vector<ProfileRow> rows;
  int num_stages() const;  // 1 + largest stage index
  bool has(int stage, Instruction instr) const;
};

// Parses either dialect. Throws PipelineError naming file and line on: unknown header, wrong column count,
// unparsable/NaN/infinite/negative numbers, zero time, unknown instruction, duplicate
// (stage, instruction, clock) rows.
Profile parse_profile(const std::string& text, const std::string& source);
Profile read_profile(const std::string& path);

// Checks the profile against a pipeline of `stages` ranks: every rank has forward and backward rows (and
// recompute rows if any rank has them), no stage index ≥ stages, and every (stage, instruction) group lists
// the same clocks as the others (a missing (stage, instruction, clock) row is named). Throws PipelineError.
void validate_profile(const Profile& p, int stages);

}  // namespace gearshift::pipeline
