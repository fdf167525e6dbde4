// The job of `gearshift calibrate`: runs the user's job as `gearshift run` does (the injected tracer streams every
// kernel's activity through the launch feed), locks the GPU at a few chosen (SM, memory) clock pairs one after
// the other (service/clock_sweep.hpp), and fits per kernel name its a, b (model/calibration_sweep.hpp) and the
// board's power (sim/calibration_model.hpp): the model file that `plan --model` and `run --auto --model` use
// instead of the class priors. docs/calibrate.md.
//
// Safety: the caller asked for it (--apply: the clocks are locked on purpose); a runtime::Session (the one
// assembly of `run --apply`: the permission check, the GPU's lock and the watchdog) guards the clocks (reset when
// this process dies); the first lock is tried before the job starts, so that a refused one ends with the clocks
// untouched; every lock is reset when the sweep ends, fails, or the job ends first.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include "gpu/spec.hpp"
#include "launch/child_process.hpp"
#include "service/clock_sweep.hpp"
#include "sim/calibration_model.hpp"

namespace gearshift::service {

struct CalibrateOptions {
  std::vector<std::string> cmd;  // the job: CMD ARGS
  unsigned gpu = 0;              // NVML index of the GPU the job uses
  std::string gpu_spec;          // spec name; empty: from NVML's device name
  int pairs = 4;                 // clock pairs to measure, the default pair included
  int min_sm_mhz = 0;            // lowest SM clock to lock, MHz; 0: half the default SM clock
  SweepOptions sweep;
  std::string watchdog_exe;      // an executable with gearshift's `_watchdog` (runtime::SessionOptions)
  ProgressSink progress_sink;    // the run's and the fit's lines (service/progress.hpp); empty: none
};

struct CalibrationRun {
  launch::ChildExit child;        // how the job ended
  SweepResult sweep;              // sweep.error empty: every pair measured
  gpu::GpuSpec spec;
  model::ClockPair ref;           // the spec's default pair, MHz
  std::vector<model::ClockPair> pairs;  // the pairs chosen, ref first
  int min_sm_mhz = 0;             // the lowest SM clock allowed, MHz
  std::size_t steps_needed = 0;   // the job's steps the sweep needs (warm-up, then each pair's settle + measured)
  std::string pair_list() const;  // "1980/3201, 1410/3201, ..." (SM/memory MHz)
};

// Runs the job to its end with the sweep beside it; the clocks are back at their defaults on return. Throws
// ServiceError before the job starts: kBadArgument (no GPU of that index, no spec, impossible pairs), kNoGpu (no
// energy counter), kNoPermission (NVML refused the first lock: the clocks were not changed); and SessionError
// (runtime/session.hpp) or gpu::OpenError when the GPU cannot be had.
CalibrationRun run_calibration(const CalibrateOptions& o);

// The fits of a complete run (sweep.error empty): each kernel's time at the pairs, then the board's power on the
// workload with those times. Throws ServiceError(kModelRefused) for an implausible model (sim::implausible_model).
sim::CalibratedModel fit_calibration(const CalibrateOptions& o, const CalibrationRun& r);

}  // namespace gearshift::service
