// Optimizer updates: the update blocks on the main stream, the optimizer's period as the step, and steps
// delimited by the updates where the op sequence does not repeat exactly.
#include "trace/step/detector.hpp"
#include "trace/kernel_names.hpp"

#include <algorithm>
#include <cmath>
#include <map>
#include <set>

#include <fmt/format.h>

namespace gearshift::trace::step_detail {

// One step = the ops after an update's end up to and including the next update (k updates per step: after
// every k-th, the one followed by the longest stretch without updates, where the forward pass begins). Steps
// are regular when their op count and duration lie near the median step's; the warm-up steps before the first
// regular one do not count. k > 1 only where the k updates of a step are different updates (distinct_updates),
// so two alternating steps are never one.
Detector::Cut Detector::cut_by_updates(const std::string& why_not_period) const {
  const auto& B = opt_blocks_;
  std::string reason;
  for (std::size_t k = 1; k <= kMaxUpdatesPerStep && B.size() >= 2 * k + 1; ++k) {
    std::size_t phase = 0;
    if (k > 1) {
      double best = -1;
      for (std::size_t ph = 0; ph < k; ++ph) {
        double sum = 0;
        int c = 0;
        for (std::size_t j = ph; j + 1 < B.size(); j += k) sum += static_cast<double>(B[j + 1].first - B[j].second), ++c;
        if (c && sum / c > best) best = sum / c, phase = ph;
      }
    }
    std::vector<std::size_t> bounds;
    for (std::size_t j = phase; j < B.size(); j += k) bounds.push_back(B[j].second);
    if (bounds.size() < 3) continue;
    std::vector<double> lens, durs;
    for (std::size_t i = 0; i + 1 < bounds.size(); ++i) {
      lens.push_back(static_cast<double>(bounds[i + 1] - bounds[i]));
      durs.push_back(static_cast<double>(time_at(bounds[i + 1]) - time_at(bounds[i])));
    }
    const double med_len = median(lens), med_dur = median(durs);
    std::vector<bool> ok(lens.size());
    for (std::size_t i = 0; i < lens.size(); ++i) {
      std::vector<std::size_t> mine;  // the step's updates
      for (std::size_t j = phase + i * k + 1; j <= phase + (i + 1) * k; ++j) mine.push_back(j);
      ok[i] = regular_update_step(lens[i], durs[i], med_len, med_dur) && distinct_updates(mine);
    }
    const auto first = std::find(ok.begin(), ok.end(), true);
    const std::size_t regular = static_cast<std::size_t>(std::count(ok.begin(), ok.end(), true));
    const std::size_t counted = static_cast<std::size_t>(ok.end() - first);
    if (regular >= 2 && static_cast<double>(regular) >= kUpdateMinRegular * static_cast<double>(counted)) {
      Cut c;
      c.method = "optimizer updates";
      c.bounds = std::move(bounds);
      c.p = static_cast<std::size_t>(med_len);
      c.score = static_cast<double>(regular) / static_cast<double>(counted);
      c.variable = true;
      c.updates_per_step = k;
      c.why_not_period = why_not_period;
      return c;
    }
    if (k == 1)
      reason = fmt::format("only {} of the {} steps between them lie within ±{:.0f} % of the median {:.0f} ops and "
                           "[1/{:.0f}, {:.0f}] x the median {:.3f} ms",
                           regular, counted, 100 * kUpdateOpsTolerance, med_len, kUpdateTimeTolerance,
                           kUpdateTimeTolerance, med_dur / 1e6);
  }
  throw NoIterationError(fmt::format("{}; nor do the trace's {} optimizer updates delimit regular steps{}{}",
                                     why_not_period, B.size(), reason.empty() ? "" : ": ", reason));
}

// The template step of update-delimited steps: among the steps near the median in op count and time, the
// one whose exact op sequence recurs most often (the first of them); where no two are the same, the one
// whose op count is nearest the median. Sets `p` to its length; returns its first main-stream index.
std::size_t Detector::most_common_step(const std::vector<std::size_t>& bounds, std::size_t& p) const {
  std::vector<double> lens, durs;
  for (std::size_t k = 0; k + 1 < bounds.size(); ++k) {
    lens.push_back(static_cast<double>(bounds[k + 1] - bounds[k]));
    durs.push_back(static_cast<double>(time_at(bounds[k + 1]) - time_at(bounds[k])));
  }
  const double med_len = median(lens), med_dur = median(durs);
  std::map<std::pair<std::size_t, std::uint64_t>, std::pair<std::size_t, std::size_t>> seen;  // (len, hash) -> (count, first k)
  std::size_t best_k = lens.size(), nearest = lens.size();
  std::size_t best_count = 0, candidates = 0;
  for (std::size_t k = 0; k < lens.size(); ++k) {
    if (!regular_update_step(lens[k], durs[k], med_len, med_dur)) continue;
    ++candidates;
    std::uint64_t h = 1469598103934665603ull;  // FNV-1a over the name ids
    for (std::size_t i = bounds[k]; i < bounds[k + 1]; ++i) h = (h ^ seq_[i]) * 1099511628211ull;
    auto& [count, first] = seen.try_emplace({bounds[k + 1] - bounds[k], h}, 0, k).first->second;
    if (++count > best_count) best_count = count, best_k = first;
    if (nearest == lens.size() || std::abs(lens[k] - med_len) < std::abs(lens[nearest] - med_len)) nearest = k;
  }
  if (best_count < 2) best_k = nearest;
  if (best_k == lens.size()) best_k = 0;  // (not reached: cut_by_updates found regular steps)
  p = bounds[best_k + 1] - bounds[best_k];
  tmpl_note_ = best_count >= 2
                   ? fmt::format("the template is the most common step: {} of the {} steps near the median launch "
                                 "exactly its {} ops{}",
                                 best_count, candidates, p,
                                 best_count < candidates ? "; the others differ inside (data-dependent code: expert "
                                                           "routing, gradient clipping) and are matched by name"
                                                         : "")
                   : fmt::format("no two steps launch the same op sequence (data-dependent code: expert routing, "
                                 "gradient clipping): the template is the step of {} ops (nearest the median); its "
                                 "positions are matched by name in the others",
                                 p);
  return bounds[best_k];
}

// Several updates of one step are different updates (AMP's unscale and the optimizer, an EMA after it, the
// two optimizers of a compiled step): the same update twice is two training steps (steps that alternate in
// length would otherwise pair up as one). `blocks`: indices into opt_blocks_.
bool Detector::distinct_updates(const std::vector<std::size_t>& blocks) const {
  std::set<std::pair<std::size_t, std::uint64_t>> sigs;
  for (std::size_t j : blocks) {
    const auto [b, e] = opt_blocks_[j];
    std::uint64_t h = 1469598103934665603ull;  // FNV-1a over the name ids
    for (std::size_t i = b; i < e; ++i) h = (h ^ seq_[i]) * 1099511628211ull;
    if (!sigs.insert({e - b, h}).second) return false;
  }
  return true;
}

bool Detector::regular_update_step(double len, double dur, double med_len, double med_dur) {
  return std::abs(len - med_len) <= kUpdateOpsTolerance * med_len && dur * kUpdateTimeTolerance >= med_dur &&
         dur <= kUpdateTimeTolerance * med_dur;
}

// The refusal where the period repeats exactly but its steps hold one update several times, and no distance
// between updates is the step; no fall-back to update-delimited steps (they would be the layers).
AlikeUpdatesError Detector::alike_updates(const Cut& period) {
  return AlikeUpdatesError(fmt::format(
      "the kernel stream repeats every {} ops ({:.1f} % match), but each such step runs the same optimizer "
      "update several times (an optimizer run per layer, or a per-layer op the name rule takes for the "
      "optimizer) and no distance between updates repeats as well: the optimizer does not mark the training "
      "step here, and the period alone is not enough. Add step markers (torch.profiler's prof.step()) with "
      "launch events",
      period.p, 100 * period.score));
}

// The period between optimizer updates: the best-matching distance between update ends.
Detector::Cut Detector::cut_by_optimizer_period(const Cut& shorter) const {
  const std::size_t n = seq_.size();
  if (opt_blocks_.size() < 2)
    throw NoIterationError(fmt::format(
        "the trace holds {} optimizer update(s), so fewer than two whole training steps; the repeating "
        "sequence of {} ops ({}) is a part of the step (a layer or a micro-step), never the step. Record at "
        "least 2 whole steps (3 or more is better), or add step markers (torch.profiler's prof.step())",
        opt_blocks_.size(), shorter.p, shorter.method));
  std::set<std::size_t> cands;
  for (std::size_t k = 1; k <= 4; ++k)
    for (std::size_t j = 0; j + k < opt_blocks_.size(); ++j) cands.insert(opt_blocks_[j + k].second - opt_blocks_[j].second);
  Cut c;
  c.method = "optimizer period";
  c.sub_period = shorter.p;
  c.sub_method = shorter.method;
  // The kernel-stream period is the shortest that matches as well as the best: a shorter distance between
  // updates is the step only where it too repeats almost exactly (a period of several steps whose every k-th
  // differs by a loss.item(), rule 5). Layer-sized distances arise where the step runs the same update kernel
  // several times (an optimizer run per layer in the backward); planned, such a period (GPT-2 with one per
  // layer: 28 ops, 32.7 % match, against the 995-op step) covered a third of the trace.
  const std::size_t longer_than = shorter.method == "kernel-stream period" ? shorter.p : 0;
  double best = -1;
  for (std::size_t P : cands) {
    if (P == 0 || P >= n) continue;
    double m = match(P);
    if (P <= longer_than && m < kLongerRepeatMatch) continue;
    if (m > best + 0.01) best = m, c.p = P;
  }
  if (c.p == 0 && longer_than > 0) throw alike_updates(shorter);
  if (c.p == 0 || 2 * c.p > n)
    throw NoIterationError(fmt::format(
        "the optimizer update recurs every {} ops, but the trace holds fewer than two whole such steps ({} ops "
        "on the main stream); the repeating sequence of {} ops is a part of the step (a micro-step or a layer). "
        "Record at least 2 whole optimizer steps",
        c.p, n, shorter.p));
  c.score = best;
  c.bounds = bounds_for_period(c.p);
  return c;
}

// A period holding several optimizer updates may be several steps: a job whose every k-th step differs by
// an op (a loss.item() copy every 10 steps) matches best at k steps. Where the optimizer's own period is
// shorter and its steps are regular and hold the same updates each, that shorter period is the step.
void Detector::prefer_optimizer_period(Cut& cut, IterationAnalysis& a) const {
  // Candidates: distances between the ends of updates up to 4 apart, shorter than the period, best match first.
  std::set<std::size_t> dists;
  for (std::size_t k = 1; k <= 4; ++k)
    for (std::size_t j = 0; j + k < opt_blocks_.size(); ++j) {
      const std::size_t d = opt_blocks_[j + k].second - opt_blocks_[j].second;
      if (d > 0 && d < cut.p) dists.insert(d);
    }
  std::vector<std::pair<double, std::size_t>> cands;
  for (std::size_t d : dists)
    if (double m = match(d); m >= 0.5) cands.emplace_back(m, d);
  std::sort(cands.begin(), cands.end(), [](const auto& x, const auto& y) { return x.first > y.first; });
  if (cands.size() > 8) cands.resize(8);
  for (const auto& [score, P] : cands) {
    Cut c;
    c.method = cut.method;
    c.p = P;
    c.score = score;
    IterationAnalysis b;
    try {
      c.bounds = bounds_for_period(P);
      b = build(c);
      // The first steps after a warm-up (a graph's capture, its first replay) may hold the update split
      // otherwise: leading steps whose update count is not the others' are warm-up, before the first step.
      const std::vector<std::size_t> counts = updates_per_step(b);
      std::map<std::size_t, std::size_t> freq;
      for (std::size_t k : counts) ++freq[k];
      std::size_t mode = 0, most = 0;
      for (auto [k, f] : freq)
        if (f > most) mode = k, most = f;
      std::size_t lead = 0;
      while (lead < counts.size() && lead < 3 && counts[lead] != mode) ++lead;
      if (lead > 0 && lead + 2 < c.bounds.size()) {
        c.bounds.erase(c.bounds.begin(), c.bounds.begin() + static_cast<std::ptrdiff_t>(lead));
        b = build(c);
      }
    } catch (const NoIterationError&) {
      continue;
    }
    if (!updates_consistent(b) || b.evidence.optimizer_updates >= a.evidence.optimizer_updates ||
        covered(b) + 0.05 < covered(a))
      continue;
    b.evidence.lines.push_back(fmt::format(
        "the best-matching period of {} ops held {} optimizer updates; the optimizer recurs every {} ops and "
        "those steps are regular (a step that differs every few steps, e.g. by a loss.item() copy)",
        cut.p, a.evidence.optimizer_updates, P));
    cut = c;
    a = std::move(b);
    return;
  }
}

// Optimizer updates starting inside each regular step (updates_consistent's count), in step order.
std::vector<std::size_t> Detector::updates_per_step(const IterationAnalysis& a) const {
  const auto blocks = optimizer_blocks(std::min<std::size_t>(kOptimizerGap, a.period_ops / 4));
  std::vector<std::size_t> out;
  for (const auto& it : a.iterations) {
    if (!it.regular) continue;
    std::size_t c = 0;
    for (const auto& [b, e] : blocks) {
      const std::int64_t t = op(b).start_ns;
      c += t >= it.start_ns && t < it.end_ns;
    }
    out.push_back(c);
  }
  return out;
}

std::string Detector::optimizer_name() const {
  const std::string& n = trace_.names[seq_[opt_blocks_.front().first]];
  return n.size() > 50 ? n.substr(0, 47) + "..." : n;
}

// Optimizer updates on the main stream: maximal runs of optimizer kernels, allowing up to `max_gap` other ops
// between them (the scalar and norm kernels of clipping and AMP unscaling). [first, one past last] main
// indices. Steps of a few ops would merge every update into one, so counting per step uses a gap of at
// most a quarter of the step.
std::vector<std::pair<std::size_t, std::size_t>> Detector::optimizer_blocks(std::size_t max_gap) const {
  std::vector<std::pair<std::size_t, std::size_t>> blocks;
  std::size_t last = 0;
  for (std::size_t i = 0; i < seq_.size(); ++i) {
    if (!is_optimizer(trace_.names[seq_[i]])) continue;
    if (!blocks.empty() && i - last <= max_gap + 1) blocks.back().second = i + 1;
    else blocks.push_back({i, i + 1});
    last = i;
  }
  return blocks;
}

bool Detector::is_optimizer(const std::string& name) { return is_optimizer_kernel(name); }

}  // namespace gearshift::trace::step_detail
