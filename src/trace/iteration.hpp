// Iteration detection on the kernel stream and the iteration template.
//
// A training step launches (almost) the same kernel sequence every time. We find the period p of the
// sequence of op names on the busiest stream of the busiest device (match fraction of s[i] == s[i+p]),
// place step boundaries where the GPU idles longest between repeats, segment the stream with a signature of
// the step's first ops (so steps of another length — warm-up, a changed batch — are found, not mis-cut), and
// build the template from the regular steps: the canonical op sequence with per-position duration statistics.
// Step markers (ProfilerStep#N, NVTX "gearshift.step") are used instead when `use_markers` is set, they are
// present and the trace maps kernels to their CPU launch times (without launch times a lagging GPU makes the
// CPU-side markers ambiguous, and the kernel stream decides).
#pragma once

#include <cstdint>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "trace/record.hpp"

namespace gearshift::trace {

// No repeating iteration could be found (message says why and what the trace needs).
class NoIterationError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

struct IterationOptions {
  std::optional<int> device = std::nullopt;  // CUDA device to analyse; none: the one with most kernels
  bool use_markers = true;   // use step markers when the trace has them
  std::size_t max_candidates = 256;  // candidate periods scored
  // Accept a kernel-stream period that has neither step markers, an optimizer update per step nor an idle gap
  // at its boundaries (the user vouches for it: `gearshift plan --trust-period`). Off: such a period is weak
  // evidence, its confidence stays below kMinStepConfidence and detection refuses.
  bool trust_period = false;
};

// Below this confidence there is no plan: detect_iterations throws NoIterationError with the reason
// (docs/step-detection.md).
inline constexpr double kMinStepConfidence = 0.7;

// Why the detected step is the job's training step, and what weakens that (docs/step-detection.md).
struct StepEvidence {
  std::vector<std::string> lines;     // the evidence used, plain words, one per line
  std::vector<std::string> warnings;  // what was excluded or is doubtful, plain words
  std::size_t micro_steps = 1;        // micro-batches inside one step (gradient accumulation), 1 without;
                                      // 0: not counted (steps delimited by optimizer updates)
  std::size_t optimizer_updates = 0;  // optimizer updates per step (0: none recognised)
  std::size_t excluded_steps = 0;     // steps left out of the template (impossible timing, outlier span)
  std::size_t devices = 1;            // devices with kernels in the trace (only `device` was analysed)
  std::size_t exact_steps = 0;        // regular steps that are exact copies of the template (marker and period
                                      // cuts; the others differ by up to 5 % of its positions)
};

struct Iteration {
  std::int64_t start_ns = 0;  // GPU start of its first op
  std::int64_t end_ns = 0;    // GPU end of its last op
  std::size_t op_count = 0;   // ops of this device inside it (all streams)
  std::size_t kernel_count = 0;
  bool regular = false;       // same op sequence as the template (on the main stream)
  // Its ops started near where the other regular steps' did: false for a gross outlier (a warm-up step several
  // times as long, a stall of a whole step), whose start offsets, gaps and length the template leaves out (its
  // main-stream durations and clocks count; its other streams' ops are left out whole).
  bool typical_timing = true;
  std::string excluded;       // why a step with the template's sequence was left out of it (empty: not)
};

// One position of the template: the op that runs there every step and how long it took.
struct TemplateOp {
  std::uint32_t name_id = 0;       // into Trace::names
  OpKind kind = OpKind::kernel;
  std::int32_t stream = 0;
  std::array<std::int32_t, 3> grid{0, 0, 0}, block{0, 0, 0};
  double duration_ns = 0;          // mean over regular steps, ns
  double duration_stdev_ns = 0;    // ns
  double duration_min_ns = 0, duration_max_ns = 0;  // ns
  double start_offset_ns = 0;      // mean start relative to the step's start over the typical steps, ns
  double gap_before_ns = 0;        // mean idle time on its stream before it over the typical steps, ns
  std::int32_t sm_clock_mhz = 0;   // sampled SM clock while traced (0: not sampled)
  std::int32_t mem_clock_mhz = 0;  // sampled memory clock while traced (0: not sampled)
  std::uint32_t samples = 0;       // steps that contributed
  std::uint32_t graph_id = 0;      // CUDA graph it ran in (0: launched on its own; trace/graph_units.hpp)
  std::int64_t graph_launch = -1;  // which graph launch of the step it belongs to (0, 1, ...), -1: none
  // CPU time of its launch call (CUDA runtime/driver launch API, by correlation id) relative to the step's start
  // (the GPU start of its first op, the same clock), mean over the steps, ns; may be negative (the CPU runs
  // ahead). Valid when launch_known: every contributing step's op knew its launch.
  double launch_offset_ns = 0;
  bool launch_known = false;
  // CPU time of its launch call in the template's reference step (one real step), relative to that step's start,
  // ns; none when unknown. The order the CPU launches the positions in: means over steps do not keep it (in
  // update-delimited steps the main stream's launches move with its laid-out starts, other streams' do not).
  std::optional<double> ref_launch_ns;
};

// A synchronize the CPU thread calls in every step (trace::SyncRecord), placed in the step's CPU timeline.
struct TemplateSync {
  SyncRecord::Scope scope = SyncRecord::Scope::device;
  std::int32_t stream = -1;   // stream it waits for (stream scope), -1: unknown or device/event scope
  double enter_offset_ns = 0; // CPU time it was entered, relative to the step's start, mean, ns
  double duration_ns = 0;     // until it returned, mean, ns
  std::uint32_t samples = 0;  // steps that contributed
};

struct IterationTemplate {
  std::vector<TemplateOp> ops;     // ordered by start_offset_ns
  double period_ns = 0;            // mean step time (start to next start) over the typical regular steps, ns
  std::size_t kernels = 0;         // kernels per step
  std::int32_t main_stream = 0;    // stream the detection ran on
  // The step's synchronizes (trace/cpu_timeline.hpp), in CPU order; empty when none or not recorded.
  std::vector<TemplateSync> syncs;
  bool syncs_known = false;        // the trace records every synchronize and the steps agree on them
  std::string cpu_note;            // what the CPU timeline of the template holds or why not (plain words)
};

struct IterationAnalysis {
  std::string method;              // "step markers", "kernel-stream period", "optimizer period" or "optimizer updates"
  int device = 0;
  std::size_t period_ops = 0;      // ops per step on the main stream
  std::vector<Iteration> iterations;  // full steps found, in order
  IterationTemplate tmpl;
  double confidence = 0;           // 0..1, see docs/step-detection.md; never below kMinStepConfidence
  StepEvidence evidence;
  std::size_t regular_count() const;
};

// Throws NoIterationError when the trace holds fewer than two repeats of any op sequence.
IterationAnalysis detect_iterations(const Trace& trace, const IterationOptions& options = {});

}  // namespace gearshift::trace
