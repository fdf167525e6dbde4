// Step detection's internals behind trace::detect_iterations (trace/iteration.hpp): the Detector's state and
// the declarations of its parts (one concept per file in trace/step/), and the thresholds those parts share.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "trace/iteration.hpp"

namespace gearshift::trace::step_detail {

// Typical timing: a regular step whose start offsets lie further from the steps' median offsets than this many
// times the median step's distance, and on average by more than kAtypicalMinShare of the median step, ran with
// another timing (a warm-up step 8x as long, a stall of a whole step); its offsets stay out of the template's.
// Only gross outliers: steps that vary by a few % (an input-bound job, 170-199 ms steps of one job) are the
// job's timing, and the in-time check judges a plan against them.
constexpr double kAtypicalFactor = 4.0;
constexpr double kAtypicalMinShare = 0.1;
constexpr double kTwoPeriodsRatio = 1.5;   // two step periods further apart than this: refused (which is typical?)
constexpr double kLongerRepeatMatch = 0.9;  // a longer repetition this exact makes the period a part of it
constexpr double kSpanOutlier = 10.0;       // a step spanning 10x more or less than its siblings' median is left out
constexpr double kWeakPeriodFactor = 0.6;   // confidence factor: the period alone (below kMinStepConfidence)
// The structural update (evidence.cpp): the step's one stretch without a GEMM or attention kernel of at least this
// many ops, this many times longer than any other such stretch of the step, its most frequent kernel repeated at
// least this often and at least once per kStructuralUpdateGemmsPerRepeat GEMM/attention kernels of the step (a pass
// over the parameter tensors: a weight per GEMM of the forward, whose backward runs two more).
constexpr std::size_t kStructuralUpdateMinOps = 64;
constexpr double kStructuralUpdateRatio = 4.0;
constexpr std::size_t kStructuralUpdateMinRepeats = 16;
constexpr std::size_t kStructuralUpdateGemmsPerRepeat = 3;
constexpr double kMinCoverage = 0.8;        // regular steps covering less of the trace: look for a longer repetition
constexpr std::size_t kOptimizerGap = 6;    // other ops allowed between the kernels of one optimizer update
// Update-delimited steps (steps whose kernels differ inside: MoE routing, data-dependent clipping).
constexpr double kUpdateOpsTolerance = 0.2;   // a step's main-stream ops within ±20 % of the median step's
constexpr double kUpdateTimeTolerance = 2.0;  // its duration within [1/2, 2] x the median step's
constexpr double kUpdateMinAligned = 0.8;     // at least 80 % of the longer of step and template align
constexpr double kUpdateMinRegular = 0.8;     // regular share of the steps counted (after the warm-up ones)
constexpr std::size_t kMaxUpdatesPerStep = 4; // updates per step tried (AMP unscale, EMA, two optimizers)

// The period repeats exactly but each of its steps runs one update several times, and no distance between updates
// is the step (Detector::alike_updates): refused without trying update-delimited steps.
struct AlikeUpdatesError : NoIterationError {
  using NoIterationError::NoIterationError;
};

struct Accum;  // one template position's statistics over the steps (step/template.cpp)

class Detector {
 public:
  Detector(const Trace& t, const IterationOptions& o) : trace_(t), opt_(o) {}

  IterationAnalysis run();

 private:
  // Where steps start on the main stream, and why.
  struct Cut {
    std::string method;               // "step markers", "kernel-stream period", "optimizer period"
    std::vector<std::size_t> bounds;  // main-stream indices of step starts (the last may be the end of the last)
    std::size_t p = 0;                // ops per step on the main stream
    double score = 1.0;               // period match fraction (markers: 1)
    std::size_t sub_period = 0;       // the shorter period the optimizer rule replaced (0: none)
    std::string sub_method;           // how that shorter period was cut
    bool variable = false;            // steps may differ inside (update-delimited): regular by count and time
    std::size_t updates_per_step = 0; // update-delimited: optimizer updates per step
    std::string why_not_period;       // update-delimited: why the exact repetition failed
  };

  struct Seg {
    std::size_t b, e;
  };

  // What build_template lays out from the mean durations and gaps (the simulator's timeline) instead of the
  // steps' mean offsets.
  enum class LayOut { none, launches, offsets_and_launches };

  // The flow (trace/iteration.cpp).
  IterationAnalysis run_by_repetition();
  IterationAnalysis run_by_updates(const std::string& why_not_period);
  void select_device_and_stream();

  // Candidate steps from the step markers (step/markers.cpp).
  Cut cut_by_markers() const;
  bool have_launch_times() const;
  std::vector<const Marker*> select_markers() const;
  std::size_t first_main_in_step(std::int64_t t, bool by_launch) const;
  std::vector<std::size_t> marker_bounds(std::size_t& p) const;

  // Candidate steps from the kernel stream's period (step/period.cpp).
  Cut cut_by_period() const;
  std::vector<std::size_t> bounds_for_period(std::size_t p) const;
  std::vector<std::size_t> snap_to_launch_units(std::vector<std::size_t> bounds) const;
  double match(std::size_t p) const;
  std::vector<std::vector<std::size_t>> occurrences_by_rarity() const;
  std::size_t find_period(double& score) const;
  std::size_t best_offset(std::size_t p) const;
  std::vector<std::size_t> signature_bounds(std::size_t o, std::size_t p) const;

  // Optimizer updates: the optimizer's period and update-delimited steps (step/updates.cpp).
  Cut cut_by_updates(const std::string& why_not_period) const;
  std::size_t most_common_step(const std::vector<std::size_t>& bounds, std::size_t& p) const;
  bool distinct_updates(const std::vector<std::size_t>& blocks) const;
  static bool regular_update_step(double len, double dur, double med_len, double med_dur);
  static AlikeUpdatesError alike_updates(const Cut& period);
  Cut cut_by_optimizer_period(const Cut& shorter) const;
  void prefer_optimizer_period(Cut& cut, IterationAnalysis& a) const;
  std::vector<std::size_t> updates_per_step(const IterationAnalysis& a) const;
  std::string optimizer_name() const;
  std::vector<std::pair<std::size_t, std::size_t>> optimizer_blocks(std::size_t max_gap) const;
  static bool is_optimizer(const std::string& name);

  // Evidence, confidence and the refusals (step/evidence.cpp).
  double covered(const IterationAnalysis& a) const;
  void refuse_unlike_marked_steps(const IterationAnalysis& a) const;
  void refuse_part_of_longer_repetition(std::size_t p, double score) const;
  bool updates_consistent(IterationAnalysis& a) const;
  static std::string inexact_note(const IterationAnalysis& a);
  bool repeats_within(const Iteration& it, std::size_t parts) const;
  void finish_evidence(IterationAnalysis& a, const Cut& first_cut) const;
  bool framework_update_agrees(IterationAnalysis& a) const;
  bool structural_update_agrees(IterationAnalysis& a) const;
  bool cross_check_markers(IterationAnalysis& a) const;
  std::size_t micro_steps(const IterationAnalysis& a) const;

  // Outliers and atypical timing (step/outliers.cpp).
  void exclude_outliers(IterationAnalysis& a, const std::vector<bool>& has_suspect) const;
  void mark_atypical_timing(IterationAnalysis& a, const std::vector<std::vector<std::int64_t>>& maps,
                            const std::vector<Seg>& segs) const;
  void mark_atypical_periods(IterationAnalysis& a, const std::vector<Seg>& segs,
                             const std::vector<std::vector<std::int64_t>>& maps, bool variable) const;

  // The steps of a cut and the template (step/template.cpp).
  IterationAnalysis build(const Cut& cut) const;
  std::pair<std::size_t, std::size_t> device_range(std::int64_t from, std::int64_t to) const;
  void accumulate_main(std::vector<Accum>& acc, const std::vector<std::int64_t>& m, std::size_t b,
                       std::int64_t step_start, bool since_matched, bool timing) const;
  double unmatched_ns(const Seg& s, const std::vector<std::int64_t>& m) const;
  template <typename GetIteration>
  void build_template(IterationAnalysis& a, const std::vector<std::uint32_t>& tmpl, const std::vector<Accum>& acc,
                      std::size_t ref_k, LayOut lay_out, GetIteration get) const;
  std::int64_t next_start(const IterationAnalysis& a, std::size_t k) const;
  static TemplateOp from_stats(const OpRecord& r, const Accum& s);

  // The main stream, shared by the parts.
  const OpRecord& op(std::size_t main_index) const { return trace_.ops[main_[main_index]]; }

  // Main-stream op index -> its start time; one past the end: the end of the last op.
  std::int64_t time_at(std::size_t i) const { return i < main_.size() ? op(i).start_ns : op(main_.size() - 1).end_ns(); }

  std::size_t first_main_at_or_after(std::int64_t t) const {
    auto it = std::lower_bound(main_.begin(), main_.end(), t,
                               [&](std::size_t i, std::int64_t v) { return trace_.ops[i].start_ns < v; });
    return static_cast<std::size_t>(it - main_.begin());
  }

  static double median(std::vector<double> v) {
    std::sort(v.begin(), v.end());
    return v.empty() ? 0 : (v[(v.size() - 1) / 2] + v[v.size() / 2]) / 2;
  }

  const Trace& trace_;
  IterationOptions opt_;
  int device_ = 0;
  std::int32_t stream_ = 0;
  std::vector<std::size_t> dev_ops_;  // indices into trace_.ops of the chosen device
  std::vector<std::size_t> main_;     // indices into trace_.ops of the main stream
  std::vector<std::uint32_t> seq_;    // name ids of main_
  mutable std::size_t seq_end_ = 0;
  mutable std::string tmpl_note_;  // update-delimited steps: how the template step was chosen
  std::map<int, std::size_t> devices_;                        // device -> kernels
  std::vector<std::pair<std::size_t, std::size_t>> opt_blocks_;  // optimizer updates: [first, end) main indices
};

}  // namespace gearshift::trace::step_detail
