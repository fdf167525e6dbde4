#include "runtime/step_check.hpp"

#include <algorithm>
#include <cmath>

#include <fmt/core.h>

namespace gearshift::runtime {

namespace {

double median(std::vector<double> v) {
  if (v.empty()) return 0;
  const auto mid = v.begin() + static_cast<std::ptrdiff_t>(v.size() / 2);
  std::nth_element(v.begin(), mid, v.end());
  return *mid;
}

}  // namespace

LiveStepCheck check_live_step(const trace::IterationAnalysis& steps, double modelled_step_ns,
                              std::vector<std::int64_t> sync_exit_ns, std::size_t template_steps) {
  LiveStepCheck c;
  c.modelled_step_ns = modelled_step_ns;
  const auto& its = steps.iterations;
  if (its.size() < 2) {
    c.why = "fewer than two steps to measure a wall period on";
    return c;
  }
  std::vector<double> periods;
  for (std::size_t i = 0; i + 1 < its.size(); ++i) periods.push_back(static_cast<double>(its[i + 1].start_ns - its[i].start_ns));
  const double period_ns = median(periods);
  // Test 1's period: that of the steps the template came from (the last template_steps: template_steps - 1
  // periods between their starts), so that a job whose step time drifts is judged on the same steps.
  const bool latest = template_steps >= 2 && template_steps < its.size();
  c.wall_period_ns =
      latest ? median(std::vector<double>(periods.end() - static_cast<std::ptrdiff_t>(template_steps - 1), periods.end()))
             : period_ns;

  // Offset of each synchronize inside its step, as a share of that step's span (start to the next start; the
  // last step: the median period).
  std::sort(sync_exit_ns.begin(), sync_exit_ns.end());
  struct At {
    std::size_t step;
    double phase;     // share of its step's span
    double since_ns;  // time since its step's start, ns
  };
  std::vector<At> at;
  std::size_t k = 0;
  for (std::int64_t t : sync_exit_ns) {
    if (t < its.front().start_ns) continue;
    while (k + 1 < its.size() && its[k + 1].start_ns <= t) ++k;
    const double span = k + 1 < its.size() ? static_cast<double>(its[k + 1].start_ns - its[k].start_ns) : period_ns;
    const double phase = static_cast<double>(t - its[k].start_ns) / span;
    if (phase >= 1.0 && k + 1 == its.size()) break;  // after the last detected step
    at.push_back({k, std::min(phase, 1.0), static_cast<double>(t - its[k].start_ns)});
  }
  c.syncs_in_steps = at.size();
  // Each synchronize needs one at the same offset (within the tolerance) in the next step that has any. With
  // many synchronizes per step such a match comes by chance: then they are no evidence (c.phase_checked false).
  std::vector<std::size_t> first_of_step;  // index into `at` where each step with synchronizes begins
  for (std::size_t i = 0; i < at.size(); ++i)
    if (i == 0 || at[i].step != at[i - 1].step) first_of_step.push_back(i);
  first_of_step.push_back(at.size());
  const std::size_t groups = first_of_step.size() - 1;
  std::size_t checked = 0;
  for (std::size_t g = 0; g + 1 < groups; ++g) {
    const std::size_t nb = first_of_step[g + 2] - first_of_step[g + 1];
    for (std::size_t i = first_of_step[g]; i < first_of_step[g + 1]; ++i) {
      ++checked;
      for (std::size_t j = first_of_step[g + 1]; j < first_of_step[g + 1] + nb; ++j) {
        double d = std::fabs(at[i].phase - at[j].phase);
        d = std::min(d, 1.0 - d);  // a synchronize at a step's very end is one at the next one's start
        // Or the same time after its step's start: a step whose span varies by more than the tolerance (the CPU's
        // time between a synchronize and the next step's first launch: 1-2 ms of a 20 ms CUDA-graph step)
        // keeps its synchronize where its GPU work ends.
        const double dt = std::fabs(at[i].since_ns - at[j].since_ns) / period_ns;
        if (d <= kSyncPhaseTolerance || dt <= kSyncPhaseTolerance) {
          ++c.syncs_in_phase;
          break;
        }
      }
    }
  }
  const double per_step = groups > 0 ? static_cast<double>(at.size()) / static_cast<double>(groups) : 0;
  const double chance = 1 - std::pow(1 - 4 * kSyncPhaseTolerance, per_step);  // two windows of ± the tolerance
  c.phase_checked = checked >= kMinSyncsForPhase && chance <= kMaxChanceMatch;
  c.syncs_checked = checked;

  const double off = modelled_step_ns / c.wall_period_ns - 1;
  const std::string of_steps = latest ? fmt::format(" of the latest {} steps", template_steps) : std::string();
  c.evidence = fmt::format("modelled step {:.2f} ms, wall period{} {:.2f} ms ({:+.1f} %); ", modelled_step_ns / 1e6,
                           of_steps, c.wall_period_ns / 1e6, 100 * off);
  if (checked < kMinSyncsForPhase)
    c.evidence += fmt::format("{} synchronize(s) inside the steps: too few to check where they fall", c.syncs_in_steps);
  else if (!c.phase_checked)
    c.evidence += fmt::format("{:.0f} synchronizes per step: too many to tell a recurring offset from chance", per_step);
  else
    c.evidence += fmt::format("{} of {} synchronizes recur at the same offset of the next step with one",
                              c.syncs_in_phase, checked);
  if (!(std::fabs(off) <= kMaxLiveStepDisagreement)) {
    c.why = fmt::format(
        "the modelled step ({:.2f} ms) is {:+.1f} % off the wall period of the {} ({:.2f} ms), "
        "more than {:.0f} %: the template does not hold the step's work",
        modelled_step_ns / 1e6, 100 * off, latest ? fmt::format("latest {} steps", template_steps) : "steps found",
        c.wall_period_ns / 1e6, 100 * kMaxLiveStepDisagreement);
    return c;
  }
  if (c.phase_checked && static_cast<double>(c.syncs_in_phase) < kMinSyncsInPhase * static_cast<double>(checked)) {
    c.why = fmt::format(
        "only {} of {} of the job's synchronizes recur at the same offset of the {:.2f} ms step: the "
        "job's own loop does not repeat with it (a layer or a part of the step)",
        c.syncs_in_phase, checked, c.wall_period_ns / 1e6);
    return c;
  }
  c.passed = true;
  return c;
}

}  // namespace gearshift::runtime
