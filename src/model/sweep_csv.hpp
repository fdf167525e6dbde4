// Reader of gearshift's open per-kernel DVFS sweep CSV (docs/sweep-format.md): a user's own measurements of
// kernels at several locked SM clocks, for `gearshift validate-model`. One KernelSweep per kernel, samples in SI
// units (s, J, MHz), ascending clocks.
//
// Columns (by name, in any order; one header line; lines starting with '#' are comments or header fields):
//   kernel                      required; the kernel (or configuration) name
//   sm_clock_mhz                the requested (locked) SM clock, MHz
//   applied_sm_clock_mhz        the SM clock read back during the run, MHz; preferred to sm_clock_mhz where both
//                               are given (a row may leave it empty); at least one of the two is required
//   mem_clock_mhz, applied_mem_clock_mhz   optional, the same for the memory clock (absent: one memory clock)
//   time_s | time_ms | time_us  exactly one: mean time of one run, in the unit the name states
//   energy_j | power_w          at least one: mean board energy of one run, or mean board power (energy = power ·
//                               time); energy_j is used where both are given
//   board                       optional; the same on every row (or the header line `# board: NAME`)
//   sm_active, sm_occupancy, tensor_active, dram_active, fp64_active, fp32_active, fp16_active
//                               optional DCGM activity ratios 0–1; a column empty on every row is ignored (noted)
// Header fields: `# board: NAME`, `# power_limit_w: W`.
// Errors: std::invalid_argument naming `origin` and the line (and column) for an empty file, a missing column,
// a field that is not a number or out of range, two rows at the same clocks of one kernel, boards that differ.
#pragma once

#include <string>
#include <vector>

#include "model/kernel_sweeps.hpp"

namespace gearshift::model {

struct SweepFile {
  std::vector<KernelSweep> kernels;  // dataset "csv", gpu = board (empty when the file names none), suite "real"
  std::vector<int> first_line;       // parallel to kernels: the line of each kernel's first row
  std::string board;                 // from the board column or the `# board:` line; empty when not named
  double power_limit_w = 0;          // W, from `# power_limit_w:`; 0 when not given
  std::vector<std::string> notes;    // what the reader ignored, one line each (origin named)
};

// Without a memory-clock column the samples' mem_mhz is `default_mem_mhz` (0: left for the caller to set once
// the board is known, e.g. to its spec's default memory clock).
SweepFile parse_sweep_csv(const std::string& text, const std::string& origin, int default_mem_mhz = 0);

}  // namespace gearshift::model
