// Steps kept out of the template: impossible timing and outlier spans (left out), atypical start offsets and
// periods (their durations count, their timing does not).
#include "trace/step/detector.hpp"

#include <algorithm>
#include <cmath>
#include <optional>

#include <fmt/format.h>

namespace gearshift::trace::step_detail {

// Timing rules of detection (docs/step-detection.md): a step holding an op with impossible timing, or whose
// span lies outside [1/kSpanOutlier, kSpanOutlier] x the median span of its regular siblings, is left out.
void Detector::exclude_outliers(IterationAnalysis& a, const std::vector<bool>& has_suspect) const {
  std::vector<std::int64_t> spans;
  for (std::size_t k = 0; k < a.iterations.size(); ++k)
    if (a.iterations[k].regular && !has_suspect[k]) spans.push_back(a.iterations[k].end_ns - a.iterations[k].start_ns);
  std::sort(spans.begin(), spans.end());
  const double median = spans.empty() ? 0 : static_cast<double>(spans[(spans.size() - 1) / 2]);
  for (std::size_t k = 0; k < a.iterations.size(); ++k) {
    Iteration& it = a.iterations[k];
    if (!it.regular) continue;
    const double span = static_cast<double>(it.end_ns - it.start_ns);
    if (has_suspect[k]) {
      it.excluded = "holds an op whose duration overruns its stream successors";
    } else if (median > 0 && (span > kSpanOutlier * median || span * kSpanOutlier < median)) {
      it.excluded = fmt::format("spans {:.3f} ms against a median of {:.3f} ms", span / 1e6, median / 1e6);
    } else {
      continue;
    }
    it.regular = false;
    ++a.evidence.excluded_steps;
    a.evidence.warnings.push_back(fmt::format("step {} left out of the template: it {}", k + 1, it.excluded));
  }
}

// Marks regular steps whose ops ran far from where the other steps' did (Iteration::typical_timing). The first
// step after CUDA's lazy initialisation has the job's kernel sequence but not its timing: in a mean its offsets
// put every later position milliseconds late in every typical step, and the runtime issued its clock changes
// for those estimates (H200 gradient accumulation: a 1.75 s first step among 170-199 ms ones moved the period
// and the late offsets by 14 ms; bench/results/2026-12-03-s16-typical-timing.md, session 16). A step's distance is the
// mean |offset - median offset| over its matched positions.
void Detector::mark_atypical_timing(IterationAnalysis& a, const std::vector<std::vector<std::int64_t>>& maps,
                                    const std::vector<Seg>& segs) const {
  std::vector<std::size_t> steps;
  for (std::size_t k = 0; k < a.iterations.size(); ++k)
    if (a.iterations[k].regular) steps.push_back(k);
  if (steps.size() < 5) return;  // too few to tell a typical step from a stalled one
  const std::size_t p = maps[steps.front()].size();
  auto offset = [&](std::size_t k, std::size_t j) -> std::optional<double> {
    if (j >= maps[k].size() || maps[k][j] < 0) return std::nullopt;
    return static_cast<double>(op(segs[k].b + static_cast<std::size_t>(maps[k][j])).start_ns - a.iterations[k].start_ns);
  };
  std::vector<double> med(p), col, dist, spans;
  for (std::size_t j = 0; j < p; ++j) {
    col.clear();
    for (std::size_t k : steps)
      if (auto o = offset(k, j)) col.push_back(*o);
    med[j] = median(col);
  }
  for (std::size_t k : steps) {
    double sum = 0;
    std::size_t n = 0;
    for (std::size_t j = 0; j < p; ++j)
      if (auto o = offset(k, j)) sum += std::abs(*o - med[j]), ++n;
    dist.push_back(n ? sum / static_cast<double>(n) : 0);
    spans.push_back(static_cast<double>(a.iterations[k].end_ns - a.iterations[k].start_ns));
  }
  const double limit = std::max(kAtypicalFactor * median(dist), kAtypicalMinShare * median(spans));
  std::size_t late = 0;
  double worst = 0;
  for (std::size_t q = 0; q < steps.size(); ++q)
    if (dist[q] > limit) ++late, worst = std::max(worst, dist[q]);
  // Typical is what most steps do: when many steps are "late", there is no one typical timing to keep.
  if (late == 0 || 2 * late >= steps.size()) return;
  std::string which;
  for (std::size_t q = 0; q < steps.size(); ++q) {
    if (dist[q] <= limit) continue;
    a.iterations[steps[q]].typical_timing = false;
    if (which.size() < 60) which += fmt::format("{}{}", which.empty() ? "" : ", ", steps[q] + 1);
  }
  a.evidence.lines.push_back(fmt::format(
      "{} of {} steps ran with atypical timing (step {}{}: their kernels started up to {:.2f} ms from the "
      "steps' median offsets on average, as a warm-up step or a stall does); the template's start offsets and "
      "period are the other steps', its durations every step's",
      late, steps.size(), which, which.size() >= 60 ? ", ..." : "", worst / 1e6));
}

// Marks regular steps whose period (start to the next step's start) lies far from the other steps' median:
// an idle stall after a step (a data-loader wait, a checkpoint save) or a warm-up step stretched by CPU-bound
// launches. The offset rule above misses a stall (the step's own ops ran on time) and needs five steps; in the
// mean period, one 2 s stall among five 85 ms GPT-2 steps made the step 585 ms and the modelled saving 5.7 %
// (iteration) and 23.6 % (phase) instead of about 2 % (held-out traces, session 28). A step is atypical where
// its period exceeds the median by more than kAtypicalFactor x the median deviation and kAtypicalMinShare x
// the median, unless half the periods or more would be. Two periods cannot say which is typical: where they
// differ by more than 1.5x (not for update-delimited steps, whose time varies with routing), detection
// refuses. A step's period here is net of its ops no template position matched (a clipping block some steps
// run is work, not a stall; skipped positions only shorten a step, which this never marks).
void Detector::mark_atypical_periods(IterationAnalysis& a, const std::vector<Seg>& segs,
                                     const std::vector<std::vector<std::int64_t>>& maps, bool variable) const {
  const std::size_t n = main_.size();
  std::vector<std::size_t> steps;
  std::vector<double> periods;
  for (std::size_t k = 0; k < segs.size(); ++k)
    if (a.iterations[k].regular && a.iterations[k].typical_timing && segs[k].e < n) {
      steps.push_back(k);
      const double period = static_cast<double>(op(segs[k].e).start_ns - a.iterations[k].start_ns);
      periods.push_back(variable ? period : period - unmatched_ns(segs[k], maps[k]));
    }
  if (periods.size() == 2 && !variable) {
    const double lo = std::min(periods[0], periods[1]), hi = std::max(periods[0], periods[1]);
    if (hi > kTwoPeriodsRatio * lo)
      throw NoIterationError(fmt::format(
          "the trace's two step periods disagree ({:.2f} and {:.2f} ms, start to next start): a warm-up step or "
          "a stall between steps, and two are too few to tell which is typical. Record at least 4 steps",
          periods[0] / 1e6, periods[1] / 1e6));
  }
  if (periods.size() < 3) return;
  const double med = median(periods);
  std::vector<double> dev;
  for (double p : periods) dev.push_back(std::abs(p - med));
  const double limit = std::max(kAtypicalFactor * median(dev), kAtypicalMinShare * med);
  std::vector<std::size_t> out;
  // Longer only: a stall or a slow warm-up lengthens a step; shorter periods (an input-bound job's first steps,
  // served from the loader's full prefetch queue: 78 and 97 ms among 110 ms ones) are the job's timing.
  for (std::size_t q = 0; q < periods.size(); ++q)
    if (periods[q] - med > limit) out.push_back(q);
  if (out.empty() || 2 * out.size() >= periods.size()) return;
  std::string which;
  for (std::size_t q : out) {
    a.iterations[steps[q]].typical_timing = false;
    if (which.size() < 80) which += fmt::format("{}step {}: {:.2f} ms", which.empty() ? "" : ", ", steps[q] + 1, periods[q] / 1e6);
  }
  a.evidence.warnings.push_back(fmt::format(
      "{} of {} steps lie far from the median period of {:.2f} ms, start to next start ({}{}: an idle stall "
      "between steps, a data-loader wait or a checkpoint, or a warm-up step); the template's period and start "
      "offsets are the other steps', its durations every step's",
      out.size(), periods.size(), med / 1e6, which, which.size() >= 80 ? ", ..." : ""));
}

}  // namespace gearshift::trace::step_detail
