// Readers for the public per-kernel DVFS sweeps in ../shared/data/kernel_sweeps/ (README there: sources, units,
// caveats). Every reader returns one KernelSweep per measured kernel (configuration), samples in SI units
// (s, J, MHz), ascending SM clock; energy is board energy of one run (idle/static power included).
// Formats:
//   synergy     SYnergy SC'23 CSV (header by name: kernel-name, core-freq, memory-freq, kernel-time [s],
//               mean-energy [J]); one or more kernels per file, rows unsorted.
//   nv-dvfs     NV-DVFS-Benchmark *-profile.csv (DRAMA … TENSO, argNo, average_power [W], benchmark,
//               core_frequency, kernel, memory_frequency, time [ms]); one kernel per (benchmark, argNo), with
//               the 7 DCGM activity counters per sample.
//   gpuptx      gpuPTXModel aggregated_dataset_*.csv: no header, a kernel-name line followed by 32 lines of
//               mem_clock_MHz,core_clock_MHz,time [s],power [W],energy [J].
//   kernel-tuner Kernel Tuner cache JSON (cache entries with nvml_gr_clock [MHz], time [ms], nvml_power [W]).
// All parsers throw std::invalid_argument naming `origin`, the line (CSV) and the column or field; the
// read_* functions add std::runtime_error for an unreadable file.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "model/fit.hpp"

namespace gearshift::model {

// DCGM profiling activity ratios (dcgmi dmon fields 1002–1008), 0–1, averaged over the run (NV-DVFS README).
struct ActivityCounters {
  double sm_active = 0;       // SMACT
  double sm_occupancy = 0;    // SMOCC
  double tensor_active = 0;   // TENSO
  double dram_active = 0;     // DRAMA
  double fp64_active = 0;     // FP64A
  double fp32_active = 0;     // FP32A
  double fp16_active = 0;     // FP16A
  bool measured = true;       // false: the row left all 7 counters empty (one V100 shmembench row does)
};

struct KernelSweep {
  std::string dataset;  // "synergy", "nv-dvfs", "gpuptx", "kernel-tuner"
  std::string gpu;      // as the dataset names it: "v100", "rtx8000", "gtxtitanx", "a100-pcie"
  std::string suite;    // "real" (application kernels) or "micro" (microbenchmarks)
  std::string kernel;   // kernel name; "benchmark/argNo" for nv-dvfs, "name" for the others
  std::vector<Sample> samples;                   // ascending (mem_mhz, sm_mhz)
  std::vector<ActivityCounters> counters;        // parallel to samples (nv-dvfs), else empty
  std::string source;                            // the file it was read from (origin); empty when not set
};

std::vector<KernelSweep> parse_synergy_csv(const std::string& text, const std::string& origin);
std::vector<KernelSweep> parse_nvdvfs_profile_csv(const std::string& text, const std::string& origin,
                                                  const std::string& gpu);
std::vector<KernelSweep> parse_gpuptx_csv(const std::string& text, const std::string& origin);
KernelSweep parse_kernel_tuner_cache(const std::string& text, const std::string& origin);
// `suite` is set by the caller (read_kernel_sweeps) from the file's folder; the parsers leave it "real".

// The samples at one memory clock (ascending SM clock), for fit_kernel. Empty when none.
std::vector<Sample> at_memory_clock(const KernelSweep& k, int mem_mhz);

// The README's caveats, applied: clocks that were requested but not reached are dropped (V100: below 480 MHz in
// synergy, since 472 MHz is still in the flat band for 7 of its 113 kernels; 405 MHz in nv-dvfs). Returns the
// sweep with those samples (and their counters) removed.
KernelSweep drop_unreached_clocks(KernelSweep k);

// All sweeps of the shared folder `kernel_sweeps_dir` (…/shared/data/kernel_sweeps) with the caveats applied,
// in a fixed order: synergy testing (26 kernels) then training (87), nv-dvfs v100 real, v100 micro, rtx8000 real,
// rtx8000 micro, gpuptx real, gpuptx micro, kernel-tuner (81 clocks). Throws std::runtime_error naming a
// missing file.
std::vector<KernelSweep> read_kernel_sweeps(const std::string& kernel_sweeps_dir);

std::string read_text_file(const std::string& path);  // throws std::runtime_error "cannot open <path>"

}  // namespace gearshift::model
