// Step detection (docs/step-detection.md): detect_iterations and the detector's top-level flow, the algorithm
// to read first. Its parts, one concept per file in trace/step/:
//   detector.hpp  the Detector's state and declarations, the thresholds the parts share
//   markers.cpp   candidate steps from the step markers (CPU ranges, by the kernels' launch times)
//   period.cpp    candidate steps from the kernel stream's period
//   updates.cpp   optimizer updates: the optimizer's period as the step, update-delimited steps
//   evidence.cpp  evidence, confidence and the step contract's refusals
//   outliers.cpp  steps left out of the template (impossible timing, outlier spans) and atypical timing
//   template.cpp  the steps of a cut and the iteration template built from them
#include "trace/iteration.hpp"
#include "trace/cpu_timeline.hpp"
#include "trace/step/detector.hpp"

#include <algorithm>
#include <map>

#include <fmt/format.h>

namespace gearshift::trace {
namespace step_detail {

IterationAnalysis Detector::run() {
  select_device_and_stream();
  opt_blocks_ = optimizer_blocks(kOptimizerGap);
  try {
    return run_by_repetition();
  } catch (const AlikeUpdatesError&) {
    throw;  // the updates would cut the exactly repeating period into its layers: no update-delimited steps
  } catch (const NoIterationError& e) {
    // The op sequence does not repeat exactly (MoE routing, data-dependent gradient clipping change the
    // kernels inside a step): where the trace holds at least two whole optimizer steps, the updates themselves
    // delimit the steps, if they recur regularly in op count and time.
    if (opt_blocks_.size() < 3) throw;
    return run_by_updates(e.what());
  }
}

IterationAnalysis Detector::run_by_repetition() {
  const Cut first = select_markers().empty() ? cut_by_period() : cut_by_markers();
  Cut cut = first;
  IterationAnalysis a = build(cut);
  if (first.method == "step markers") refuse_unlike_marked_steps(a);
  if (first.method == "kernel-stream period" && covered(a) < kMinCoverage) refuse_part_of_longer_repetition(first.p, first.score);
  // The step contract's optimizer rule: where the job updates its weights, a step holds the same number of
  // updates every time (one, almost always). A period whose steps hold none of the trace's updates is a part
  // of the step (a micro-step of gradient accumulation, or a layer): the step is the optimizer's period.
  if (!opt_blocks_.empty() && !updates_consistent(a)) {
    const double first_covered = covered(a);
    cut = cut_by_optimizer_period(first);
    a = build(cut);
    // A shorter optimizer period must cover the trace as the period's steps did (a layer covers a third).
    if (cut.p < first.p && first.method == "kernel-stream period" && covered(a) + 0.05 < first_covered)
      throw alike_updates(first);
    if (!updates_consistent(a))
      throw NoIterationError(fmt::format(
          "the optimizer update ({} in the trace) does not recur once per step of {} ops: no consistent training "
          "step; the trace needs at least 2 whole optimizer steps",
          opt_blocks_.size(), a.period_ops));
  } else if (a.evidence.optimizer_updates > 1 && cut.method == "kernel-stream period") {
    prefer_optimizer_period(cut, a);
  }
  finish_evidence(a, cut);
  return a;
}

// Steps delimited by the optimizer updates, when the exact op sequence does not repeat.
IterationAnalysis Detector::run_by_updates(const std::string& why_not_period) {
  seq_end_ = 0;  // a failed marker cut may have set it
  const Cut cut = cut_by_updates(why_not_period);
  IterationAnalysis a;
  try {
    a = build(cut);
  } catch (const NoIterationError& e) {
    throw NoIterationError(fmt::format("{}; nor do the optimizer updates delimit a regular step: {}", why_not_period, e.what()));
  }
  a.evidence.optimizer_updates = cut.updates_per_step;
  finish_evidence(a, cut);
  return a;
}

void Detector::select_device_and_stream() {
  std::map<int, std::size_t> per_device;
  for (const auto& r : trace_.ops)
    if (r.kind == OpKind::kernel) per_device[r.device]++;
  if (per_device.empty()) throw NoIterationError("the trace holds no kernels");
  devices_ = per_device;
  if (opt_.device) {
    device_ = *opt_.device;
    if (!per_device.count(device_))
      throw NoIterationError(fmt::format("the trace holds no kernels of device {}", device_));
  } else {
    device_ = std::max_element(per_device.begin(), per_device.end(),
                               [](auto& x, auto& y) { return x.second < y.second; })
                  ->first;
  }
  std::map<int, std::size_t> per_stream;
  for (std::size_t i = 0; i < trace_.ops.size(); ++i) {
    const auto& r = trace_.ops[i];
    if (r.device != device_) continue;
    dev_ops_.push_back(i);
    if (r.kind == OpKind::kernel) per_stream[r.stream]++;
  }
  stream_ = std::max_element(per_stream.begin(), per_stream.end(),
                             [](auto& x, auto& y) { return x.second < y.second; })
                ->first;
  for (std::size_t i : dev_ops_)
    if (trace_.ops[i].stream == stream_) {
      main_.push_back(i);
      seq_.push_back(trace_.ops[i].name_id);
    }
}

}  // namespace step_detail

std::size_t IterationAnalysis::regular_count() const {
  return static_cast<std::size_t>(std::count_if(iterations.begin(), iterations.end(), [](auto& i) { return i.regular; }));
}

IterationAnalysis detect_iterations(const Trace& trace, const IterationOptions& options) {
  IterationAnalysis a = step_detail::Detector(trace, options).run();
  if (a.method != "optimizer updates") attach_cpu_timeline(trace, a);  // update-delimited: placed while built
  return a;
}

}  // namespace gearshift::trace
