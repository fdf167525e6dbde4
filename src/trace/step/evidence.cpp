// Why the detected step is the training step: the evidence lines, the confidence, and the refusals of the
// step contract (docs/step-detection.md).
#include "trace/step/detector.hpp"
#include "trace/kernel_names.hpp"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <map>
#include <set>
#include <string>

#include <fmt/format.h>

namespace gearshift::trace::step_detail {

// Share of the device's ops that lie in regular steps.
double Detector::covered(const IterationAnalysis& a) const {
  std::size_t in = 0;
  for (const auto& it : a.iterations)
    if (it.regular) in += it.op_count;
  return dev_ops_.empty() ? 0 : static_cast<double>(in) / static_cast<double>(dev_ops_.size());
}

// Marked steps are the job's steps only if they are alike: where the regular ones (one kernel sequence) hold
// less than half of the marked ops and the others are at least twice as long, the markers cut something
// else. Markers around each forward layer of a job whose optimizer has no recognised name made 33 regular
// "steps" of 27 ops and 3 long irregular ones holding the backward passes (70 % of the ops), planned with
// confidence 0.92 (held-out traces, session 28). A step variant (a clipping block in some steps) makes steps
// a fraction longer, not several times longer, and is not refused here.
void Detector::refuse_unlike_marked_steps(const IterationAnalysis& a) const {
  std::size_t regular_ops = 0, all_ops = 0;
  std::vector<double> other;
  for (const auto& it : a.iterations) {
    all_ops += it.op_count;
    if (it.regular) regular_ops += it.op_count;
    else other.push_back(static_cast<double>(it.op_count));
  }
  if (all_ops == 0 || 2 * regular_ops >= all_ops || a.regular_count() == 0) return;
  if (median(other) < 2.0 * static_cast<double>(regular_ops) / static_cast<double>(a.regular_count())) return;
  throw NoIterationError(fmt::format(
      "the step markers cut {} steps, but the {} alike ones ({} ops each) hold only {:.0f} % of the marked ops; "
      "the others are longer and differ: the markers cut parts of the training step (a layer, a pass), not the "
      "step. Mark each training step once (torch.profiler's prof.step() after the optimizer)",
      a.iterations.size(), a.regular_count(), a.period_ops,
      100.0 * static_cast<double>(regular_ops) / static_cast<double>(all_ops)));
}

// "A layer is never a step": where the period's steps leave much of the trace uncovered, a period whose
// sequence is itself part of a longer repetition that the trace holds fewer than two whole times (P > n/2, so
// no candidate above) is refused. Multiples of the step match only as well as the step, never clearly
// better; a step with an inserted op shifts later steps, which a longer shift can match, but then the steps
// still cover the trace.
void Detector::refuse_part_of_longer_repetition(std::size_t p, double score) const {
  const std::size_t n = seq_.size();
  const std::size_t min_overlap = std::max<std::size_t>(p, 16);
  const auto by_count = occurrences_by_rarity();
  std::set<std::size_t> longer;
  for (const auto& v : by_count) {
    for (std::size_t k = 1; k < v.size(); ++k) {
      std::size_t d = v[k] - v.front();
      if (2 * d > n && d + min_overlap <= n) longer.insert(d);
    }
    if (longer.size() >= opt_.max_candidates) break;
  }
  for (std::size_t P : longer) {
    // A near-multiple of the period is several steps (with irregular ones among them), not a longer unit.
    const std::size_t k = (P + p / 2) / p, tol = std::max<std::size_t>(2, p / 50);
    if (k >= 2 && (P > k * p ? P - k * p : k * p - P) <= tol) continue;
    double m = match(P);
    if (m >= kLongerRepeatMatch && m >= score + 0.05)
      throw NoIterationError(fmt::format(
          "the kernel stream repeats a sequence of {} ops only {:.2f} times (fewer than two whole steps); the "
          "shorter period of {} ops ({:.0f} % match) is a part of it (a layer or a micro-step), never the step. "
          "Record at least 2 whole steps (3 or more is better)",
          P, static_cast<double>(n) / static_cast<double>(P), p, 100 * score));
  }
}

// Optimizer updates per regular step: the same non-zero count in every regular step is consistent.
// Several updates in a step must be different updates (distinct_updates): the same update twice means the
// period is several training steps.
bool Detector::updates_consistent(IterationAnalysis& a) const {
  const std::vector<std::size_t> per_step = updates_per_step(a);
  std::set<std::size_t> counts;
  std::size_t k = 0;
  for (const auto& it : a.iterations) {
    if (!it.regular) continue;
    const std::size_t c = per_step[k++];
    // The same update several times in a marked step is the job's own step (an optimizer run per layer in
    // the backward): the markers say where steps begin; a period, not marked, may be several steps.
    if (c > 1) {  // the step's updates, as opt_blocks_ (kOptimizerGap) delimits them
      std::vector<std::size_t> mine;
      for (std::size_t j = 0; j < opt_blocks_.size(); ++j) {
        const std::int64_t t = op(opt_blocks_[j].first).start_ns;
        if (t >= it.start_ns && t < it.end_ns) mine.push_back(j);
      }
      if (!distinct_updates(mine) && (a.method != "step markers" || repeats_within(it, c))) return false;
    }
    counts.insert(c);
  }
  if (counts.size() != 1 || *counts.begin() == 0) return false;
  a.evidence.optimizer_updates = *counts.begin();
  return true;
}

// Where regular steps are not all exact copies of the template: how many are ("8 of 8 steps share one kernel
// sequence" was printed for steps of 951-983 ops).
std::string Detector::inexact_note(const IterationAnalysis& a) {
  if (a.evidence.exact_steps >= a.regular_count()) return {};
  return fmt::format(" ({} exactly; the others differ by a few ops, at most 5 % of its positions)",
                     a.evidence.exact_steps);
}

// Whether a step is `parts` repetitions of one op sequence (≥ kLongerRepeatMatch of its main-stream ops match
// one part later): several training steps in one marked range, not one step running its update per layer.
bool Detector::repeats_within(const Iteration& it, std::size_t parts) const {
  const std::size_t b = first_main_at_or_after(it.start_ns), e = first_main_at_or_after(it.end_ns);
  const std::size_t P = (e - b) / parts;
  if (P == 0 || e <= b + P) return false;
  std::size_t hits = 0;
  for (std::size_t i = b; i + P < e; ++i) hits += seq_[i] == seq_[i + P];
  return static_cast<double>(hits) >= kLongerRepeatMatch * static_cast<double>(e - b - P);
}

// The evidence lines, micro-steps, the idle-gap test and the final confidence; throws below the threshold.
void Detector::finish_evidence(IterationAnalysis& a, const Cut& first_cut) const {
  StepEvidence& ev = a.evidence;
  ev.devices = devices_.size();
  bool markers_agree = false;
  const std::size_t regular = a.regular_count();
  if (a.method == "step markers") {
    ev.lines.push_back(fmt::format("{} step markers (ProfilerStep# / gearshift.step) with each kernel's launch "
                                   "time; {} of {} steps share one kernel sequence{}",
                                   select_markers().size(), regular, a.iterations.size(), inexact_note(a)));
  } else if (first_cut.variable) {
    std::size_t lo = SIZE_MAX, hi = 0;
    double tlo = 1e300, thi = 0;
    for (const auto& it : a.iterations)
      if (it.regular) {
        lo = std::min(lo, it.kernel_count), hi = std::max(hi, it.kernel_count);
        const double t = static_cast<double>(it.end_ns - it.start_ns);
        tlo = std::min(tlo, t), thi = std::max(thi, t);
      }
    // (the refusal's reason without its advice)
    const std::string why = first_cut.why_not_period.substr(0, first_cut.why_not_period.find("; "));
    ev.lines.push_back(fmt::format("the op sequence does not repeat exactly ({})", why));
    ev.lines.push_back(fmt::format(
        "the optimizer update delimits the steps instead: {} updates, {} per step; {} of {} steps between them "
        "are regular (within ±{:.0f} % of the median op count and [1/{:.0f}, {:.0f}] x the median time; "
        "{}–{} kernels, {:.3f}–{:.3f} ms GPU span)",
        opt_blocks_.size(), first_cut.updates_per_step, regular, a.iterations.size(), 100 * kUpdateOpsTolerance,
        kUpdateTimeTolerance, kUpdateTimeTolerance, lo, hi, tlo / 1e6, thi / 1e6));
    ev.lines.push_back(tmpl_note_);
    if (regular < a.iterations.size())
      ev.warnings.push_back(fmt::format("{} of the {} update-delimited steps are irregular (warm-up, or far from "
                                        "the median in op count or time) and left out of the template",
                                        a.iterations.size() - regular, a.iterations.size()));
    markers_agree = cross_check_markers(a);
  } else {
    ev.lines.push_back(fmt::format("the kernel stream repeats every {} ops ({:.1f} % of ops match one period "
                                   "later); {} of {} steps share one kernel sequence{}",
                                   a.period_ops, 100 * first_cut.score, regular, a.iterations.size(),
                                   inexact_note(a)));
    markers_agree = cross_check_markers(a);
  }
  if (ev.optimizer_updates > 0)
    ev.lines.push_back(fmt::format("the optimizer update ({}) occurs {} per step", optimizer_name(),
                                   ev.optimizer_updates == 1 ? std::string("once") : fmt::format("{} times", ev.optimizer_updates)));
  else
    ev.lines.push_back("no optimizer update recognised in the trace (inference, or an optimizer whose kernels "
                       "gearshift does not name)");
  // Update-delimited steps do not count micro-steps: the step's opening kernels need not open a micro-batch
  // (Megatron's open with per-parameter copies), and the update delimits the step with or without accumulation.
  if (first_cut.variable) ev.micro_steps = 0;
  if (a.method == "optimizer period") {
    ev.micro_steps = std::max<std::size_t>(1, micro_steps(a));
    // One micro-step is no accumulation: the shorter cut was a part of the step (markers around each layer).
    const std::string what = first_cut.sub_method == "step markers"
                                 ? fmt::format("the step markers cut {} ops", first_cut.sub_period)
                                 : fmt::format("a shorter sequence of {} ops repeats", first_cut.sub_period);
    if (ev.micro_steps > 1)
      ev.lines.push_back(fmt::format("gradient accumulation: the step is the optimizer's period; {} inside it "
                                     "({} micro-steps by the step's opening kernels)",
                                     what, ev.micro_steps));
    else
      ev.lines.push_back(fmt::format("the step is the optimizer's period; {} inside it, a part of the step "
                                     "(no update in each part), not a micro-step (its opening kernels occur once)",
                                     what));
  }
  const bool framework_update = a.method != "step markers" && ev.optimizer_updates == 0 && framework_update_agrees(a);
  const bool structural_update = a.method != "step markers" && ev.optimizer_updates == 0 && !markers_agree &&
                                 !framework_update && structural_update_agrees(a);
  double factor = 1.0;
  // Idle gaps at the boundaries are no evidence: an eager forward idles between layers as long as a decode
  // loop between tokens (H200 traces, docs/step-detection.md).
  if (a.method != "step markers" && ev.optimizer_updates == 0 && !markers_agree && !framework_update &&
      !structural_update) {
    if (opt_.trust_period)
      ev.warnings.push_back("the step rests on the kernel-stream period alone (--trust-period): no step "
                            "markers and no optimizer update say it is the training step");
    else
      factor = kWeakPeriodFactor;
  }
  a.confidence *= factor;
  if (devices_.size() > 1) {
    std::string list;
    for (auto [d, k] : devices_) list += fmt::format("{}{}: {} kernels", list.empty() ? "" : ", ", d, k);
    ev.warnings.push_back(fmt::format("the trace holds {} devices ({}); analysed device {} only{}",
                                      devices_.size(), list, device_,
                                      opt_.device ? "" : " (the busiest; choose another with --device)"));
  }
  if (a.confidence < kMinStepConfidence)
    throw NoIterationError(fmt::format(
        "the detected step ({} ops, {:.3f} ms, by {}) is not trustworthy: confidence {:.2f} is below {:.2f}{}. "
        "What would help: step markers (torch.profiler's prof.step(), or NVTX ranges 'gearshift.step') with "
        "launch events, more whole steps, or --trust-period if you know the period is the step",
        a.period_ops, a.tmpl.period_ns / 1e6, a.method, a.confidence, kMinStepConfidence,
        factor == kWeakPeriodFactor ? " (no step markers and no optimizer update: nothing but the period says "
                                      "this is the training step; a layer of an inference pass repeats as well)"
                                    : ""));
}

// The framework's own optimizer-step annotation (torch's "Optimizer.step#<class>.step") as evidence that the
// period is the training step where the update's kernels are on no name list (Adafactor, Lion, a hand-written
// SGD): the ranges that start within the regular steps' span (GPU time, one period before it allowed: the CPU
// runs ahead) number the steps (one more at most), and the median spacing of consecutive ones is the period
// within 10 %. Adds an evidence line when they agree.
bool Detector::framework_update_agrees(IterationAnalysis& a) const {
  const auto& r = trace_.optimizer_ranges;
  std::vector<const Iteration*> steps;
  for (const auto& it : a.iterations)
    if (it.regular) steps.push_back(&it);
  if (r.size() < 2 || steps.size() < 2 || !(a.tmpl.period_ns > 0)) return false;
  const double period = a.tmpl.period_ns;
  const double lo = static_cast<double>(steps.front()->start_ns) - period;
  const double hi = static_cast<double>(steps.back()->end_ns);
  std::vector<double> starts;
  for (const auto& m : r)
    if (static_cast<double>(m.start_ns) >= lo && static_cast<double>(m.start_ns) < hi)
      starts.push_back(static_cast<double>(m.start_ns));
  if (starts.size() < steps.size() || starts.size() > steps.size() + 1) return false;
  std::vector<double> gaps;
  for (std::size_t i = 1; i < starts.size(); ++i) gaps.push_back(starts[i] - starts[i - 1]);
  std::nth_element(gaps.begin(), gaps.begin() + static_cast<std::ptrdiff_t>(gaps.size() / 2), gaps.end());
  const double spacing = gaps[gaps.size() / 2];
  if (std::abs(spacing / period - 1) > 0.1) return false;
  a.evidence.lines.push_back(fmt::format(
      "the framework's optimizer-step annotation ('{}') occurs once per step: {} of them in the {} regular steps' "
      "span, {:.3f} ms apart (median) for a {:.3f} ms period",
      r.front().name.size() > 60 ? r.front().name.substr(0, 57) + "..." : r.front().name, starts.size(),
      steps.size(), spacing / 1e6, period / 1e6));
  return true;
}

// An optimizer update that no name list knows and no annotation names (transformers' Adafactor, Lion, a
// hand-written SGD: a short chain of elementwise and reduction kernels per parameter tensor), recognised by its
// structure: on the template's main stream, the one stretch between GEMM or attention kernels (cyclic: the step's
// boundary may cut it) of at least kStructuralUpdateMinOps ops, kStructuralUpdateRatio times longer than every
// other such stretch of the step, whose most frequent kernel recurs at least kStructuralUpdateMinRepeats times and
// once per kStructuralUpdateGemmsPerRepeat matrix kernels of the step (150 times for 183 on GPT-2 small, 771 for 760
// on T5-base). Measured on H100 `gearshift trace` recordings (bench/results/2026-12-07-s35-structural-update.md):
// 205 ops (hand SGD on GPT-2 small), 1,241 (Lion), 3,754 (Adafactor) and 6,916 (T5-base with Adafactor) against at
// most 42 in any other stretch of their steps. A layer or a token of an inference pass has no such stretch. Adds an evidence
// line when found.
bool Detector::structural_update_agrees(IterationAnalysis& a) const {
  const auto& ops = a.tmpl.ops;
  std::vector<std::size_t> seq;  // the template's main-stream ops, in order
  for (std::size_t i = 0; i < ops.size(); ++i)
    if (ops[i].stream == a.tmpl.main_stream) seq.push_back(i);
  const std::size_t n = seq.size();
  if (n < kStructuralUpdateMinOps) return false;
  std::vector<bool> matrix(n, false);
  std::size_t first_matrix = n;
  for (std::size_t j = 0; j < n; ++j) {
    const TemplateOp& op = ops[seq[j]];
    if (op.kind != OpKind::kernel) continue;
    const std::string lower = lower_case_name(trace_.names[op.name_id]);
    matrix[j] = is_gemm_kernel_lower(lower) || is_attention_kernel_lower(lower);
    if (matrix[j] && first_matrix == n) first_matrix = j;
  }
  if (first_matrix == n) return false;  // no GEMM at all: nothing to tell a forward and backward by
  // Stretches between matrix kernels, walking once around the step from the first one.
  std::size_t longest = 0, second = 0, longest_from = 0, run = 0, run_from = 0;
  for (std::size_t k = 1; k <= n; ++k) {
    const std::size_t j = (first_matrix + k) % n;
    if (!matrix[j]) {
      if (run++ == 0) run_from = j;
      continue;
    }
    if (run > longest) {
      second = longest;
      longest = run, longest_from = run_from;
    } else {
      second = std::max(second, run);
    }
    run = 0;
  }
  const double ratio = second > 0 ? static_cast<double>(longest) / static_cast<double>(second) : 0.0;
  if (longest < kStructuralUpdateMinOps || (second > 0 && ratio < kStructuralUpdateRatio)) return false;
  std::map<std::uint32_t, std::size_t> count;
  for (std::size_t k = 0; k < longest; ++k) {
    const TemplateOp& op = ops[seq[(longest_from + k) % n]];
    if (op.kind == OpKind::kernel) ++count[op.name_id];
  }
  const auto top = std::max_element(count.begin(), count.end(),
                                    [](const auto& x, const auto& y) { return x.second < y.second; });
  const auto matrix_kernels = static_cast<std::size_t>(std::count(matrix.begin(), matrix.end(), true));
  if (top == count.end() || top->second < kStructuralUpdateMinRepeats ||
      top->second * kStructuralUpdateGemmsPerRepeat < matrix_kernels)
    return false;
  const std::string& name = trace_.names[top->first];
  a.evidence.lines.push_back(fmt::format(
      "an optimizer update recognised by its structure: one stretch of {} ops without a GEMM or attention kernel "
      "per step ({}), its most frequent kernel {} times for the step's {} GEMM and attention kernels ('{}'): a pass "
      "over the parameter tensors by an optimizer gearshift does not name",
      longest,
      second > 0 ? fmt::format("{:.0f}x the next longest, {} ops", ratio, second) : std::string("the step's only one"),
      top->second, matrix_kernels, name.size() > 60 ? name.substr(0, 57) + "..." : name));
  return true;
}

// Where CPU step markers exist but cannot cut steps (no launch times), the period's steps must not outnumber
// them: several detected steps inside one marked step means the period is a part of the step.
// Returns whether they agree: about one detected step per marked step.
bool Detector::cross_check_markers(IterationAnalysis& a) const {
  std::vector<const Marker*> cpu;
  for (const auto& m : trace_.markers)
    if (!m.on_gpu) cpu.push_back(&m);
  if (cpu.size() < 2) return false;
  const std::int64_t lo = cpu.front()->start_ns, hi = cpu.back()->start_ns + cpu.back()->duration_ns;
  std::size_t inside = 0;
  for (const auto& it : a.iterations) inside += it.start_ns >= lo && it.start_ns < hi;
  // Why the markers did not cut (the reason printed was "no launch events" even where the markers had cut
  // and the optimizer rule had overruled them).
  const std::string why = !opt_.use_markers       ? "--no-markers"
                          : !have_launch_times()  ? "the trace lacks launch events to cut steps by its markers"
                                                  : "the optimizer updates in the marked steps overruled their cut";
  if (inside > cpu.size() + 1 && inside * 2 > cpu.size() * 3)
    throw NoIterationError(fmt::format("{} steps of {} ops were found inside the trace's {} step markers: the "
                                       "period is a part of the marked step, not the step, or each marker spans "
                                       "several training steps; the two disagree ({})",
                                       inside, a.period_ops, cpu.size(), why));
  const bool agree = inside + 1 >= cpu.size() && inside <= cpu.size() + 1;
  a.evidence.lines.push_back(fmt::format("{} of the steps start within the trace's {} step marker ranges (GPU time; "
                                         "markers not used to cut: {}){}",
                                         inside, cpu.size(), why, agree ? ": one step per marked step" : ""));
  return agree;
}

// Occurrences of the step's first kernels inside one template step: 1 without gradient accumulation.
std::size_t Detector::micro_steps(const IterationAnalysis& a) const {
  std::vector<std::uint32_t> main;
  for (const auto& o : a.tmpl.ops)
    if (o.stream == stream_) main.push_back(o.name_id);
  const std::size_t k = std::min<std::size_t>(8, main.size());
  if (k == 0) return 1;
  std::size_t count = 0;
  for (std::size_t i = 0; i + k <= main.size(); ++i)
    count += std::equal(main.begin(), main.begin() + static_cast<std::ptrdiff_t>(k),
                        main.begin() + static_cast<std::ptrdiff_t>(i));
  return count;
}

}  // namespace gearshift::trace::step_detail
