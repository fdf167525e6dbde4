#include "trace/iteration.hpp"
#include "trace/cpu_timeline.hpp"
#include "trace/graph_units.hpp"
#include "trace/kernel_names.hpp"
#include "trace/sequence_align.hpp"

#include <algorithm>
#include <cmath>
#include <map>
#include <numeric>
#include <set>
#include <unordered_map>

#include <fmt/format.h>

namespace gearshift::trace {
namespace {

// Positional alignment of a segment to the template by edit distance (unit costs). Returns, for every template
// position, the index into the segment that matched it (or -1).
std::vector<std::int64_t> align(const std::vector<std::uint32_t>& tmpl, const std::uint32_t* seg, std::size_t len) {
  const std::size_t p = tmpl.size();
  std::vector<std::int64_t> map(p, -1);
  if (len == p && std::equal(tmpl.begin(), tmpl.end(), seg)) {
    std::iota(map.begin(), map.end(), 0);
    return map;
  }
  if ((p + 1) * (len + 1) > (std::size_t{1} << 26)) {
    // Steps of >8k ops: an edit-distance table would not fit in 64 MiB; compare positionally instead.
    for (std::size_t i = 0; i < std::min(p, len); ++i)
      if (tmpl[i] == seg[i]) map[i] = static_cast<std::int64_t>(i);
    return map;
  }
  // dp over (p+1) x (len+1); traceback codes: 0 diag, 1 up (template op missing), 2 left (inserted op)
  std::vector<std::uint32_t> prev(len + 1), cur(len + 1);
  std::vector<std::uint8_t> tb((p + 1) * (len + 1));
  for (std::size_t j = 0; j <= len; ++j) {
    prev[j] = static_cast<std::uint32_t>(j);
    tb[j] = 2;
  }
  for (std::size_t i = 1; i <= p; ++i) {
    cur[0] = static_cast<std::uint32_t>(i);
    tb[i * (len + 1)] = 1;
    for (std::size_t j = 1; j <= len; ++j) {
      std::uint32_t diag = prev[j - 1] + (tmpl[i - 1] == seg[j - 1] ? 0u : 1u);
      std::uint32_t up = prev[j] + 1, left = cur[j - 1] + 1;
      std::uint8_t code = 0;
      std::uint32_t best = diag;
      if (up < best) best = up, code = 1;
      if (left < best) best = left, code = 2;
      cur[j] = best;
      tb[i * (len + 1) + j] = code;
    }
    std::swap(prev, cur);
  }
  std::size_t i = p, j = len;
  while (i > 0 && j > 0) {
    std::uint8_t code = tb[i * (len + 1) + j];
    if (code == 0) {
      if (tmpl[i - 1] == seg[j - 1]) map[i - 1] = static_cast<std::int64_t>(j - 1);
      --i, --j;
    } else if (code == 1) {
      --i;
    } else {
      --j;
    }
  }
  return map;
}

struct Stats {
  double sum = 0, sum2 = 0, lo = 1e300, hi = -1e300;
  std::uint32_t n = 0;
  void add(double v) {
    sum += v, sum2 += v * v, ++n;
    lo = std::min(lo, v), hi = std::max(hi, v);
  }
  double mean() const { return n ? sum / n : 0; }
  double stdev() const { return n > 1 ? std::sqrt(std::max(0.0, sum2 / n - mean() * mean())) : 0; }
};

struct Accum {
  Stats dur, offset, gap;
  Stats launch;  // CPU launch time relative to the step's GPU start, ns (ops whose trace knows it)
  std::map<std::int32_t, int> sm, mem;
};

int mode(const std::map<std::int32_t, int>& m) {
  int best = 0, count = 0;
  for (auto [k, c] : m)
    if (c > count && k > 0) best = k, count = c;
  return best;
}

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

class Detector {
 public:
  Detector(const Trace& t, const IterationOptions& o) : trace_(t), opt_(o) {}

  IterationAnalysis run() {
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

 private:
  IterationAnalysis run_by_repetition() {
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

  // Steps delimited by the optimizer updates, when the exact op sequence does not repeat.
  IterationAnalysis run_by_updates(const std::string& why_not_period) {
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

  // Main-stream op index -> its start time; one past the end: the end of the last op.
  std::int64_t time_at(std::size_t i) const { return i < main_.size() ? op(i).start_ns : op(main_.size() - 1).end_ns(); }

  // One step = the ops after an update's end up to and including the next update (k updates per step: after
  // every k-th, the one followed by the longest stretch without updates, where the forward pass begins). Steps
  // are regular when their op count and duration lie near the median step's; the warm-up steps before the first
  // regular one do not count. k > 1 only where the k updates of a step are different updates (distinct_updates),
  // so two alternating steps are never one.
  Cut cut_by_updates(const std::string& why_not_period) const {
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
  std::size_t most_common_step(const std::vector<std::size_t>& bounds, std::size_t& p) const {
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
  bool distinct_updates(const std::vector<std::size_t>& blocks) const {
    std::set<std::pair<std::size_t, std::uint64_t>> sigs;
    for (std::size_t j : blocks) {
      const auto [b, e] = opt_blocks_[j];
      std::uint64_t h = 1469598103934665603ull;  // FNV-1a over the name ids
      for (std::size_t i = b; i < e; ++i) h = (h ^ seq_[i]) * 1099511628211ull;
      if (!sigs.insert({e - b, h}).second) return false;
    }
    return true;
  }

  static double median(std::vector<double> v) {
    std::sort(v.begin(), v.end());
    return v.empty() ? 0 : (v[(v.size() - 1) / 2] + v[v.size() / 2]) / 2;
  }

  static bool regular_update_step(double len, double dur, double med_len, double med_dur) {
    return std::abs(len - med_len) <= kUpdateOpsTolerance * med_len && dur * kUpdateTimeTolerance >= med_dur &&
           dur <= kUpdateTimeTolerance * med_dur;
  }

  Cut cut_by_markers() const {
    Cut c;
    c.method = "step markers";
    c.bounds = marker_bounds(c.p);
    if (c.bounds.size() < 2) throw NoIterationError("the trace's step markers cover fewer than 2 steps");
    return c;
  }

  Cut cut_by_period() const {
    Cut c;
    c.method = "kernel-stream period";
    c.p = find_period(c.score);
    c.bounds = bounds_for_period(c.p);
    return c;
  }

  std::vector<std::size_t> bounds_for_period(std::size_t p) const {
    std::size_t o = best_offset(p);
    // Ops right at a step boundary (data copies, one-off memsets) are the least stable: when the step's
    // first ops do not repeat, start the signature a little later.
    const std::size_t expected = seq_.size() / p;
    std::vector<std::size_t> bounds, most;  // most: the signature found most often (warm-up ops lower `expected`)
    for (std::size_t d = 0; d <= std::max<std::size_t>(16, p / 10) && d < p; ++d) {
      bounds = signature_bounds(o + d, p);
      if (bounds.size() + 1 >= expected && bounds.size() >= 2) break;
      if (bounds.size() > most.size()) most = bounds;
    }
    if (bounds.size() + 1 < expected && most.size() > bounds.size()) bounds = std::move(most);
    if (bounds.size() < 2)
      throw NoIterationError(fmt::format("found a period of {} ops but no step start that repeats", p));
    return snap_to_launch_units(bounds);
  }

  // The refusal where the period repeats exactly but its steps hold one update several times, and no distance
  // between updates is the step; no fall-back to update-delimited steps (they would be the layers).
  static AlikeUpdatesError alike_updates(const Cut& period) {
    return AlikeUpdatesError(fmt::format(
        "the kernel stream repeats every {} ops ({:.1f} % match), but each such step runs the same optimizer "
        "update several times (an optimizer run per layer, or a per-layer op the name rule takes for the "
        "optimizer) and no distance between updates repeats as well: the optimizer does not mark the training "
        "step here, and the period alone is not enough. Add step markers (torch.profiler's prof.step()) with "
        "launch events",
        period.p, 100 * period.score));
  }

  // The period between optimizer updates: the best-matching distance between update ends.
  Cut cut_by_optimizer_period(const Cut& shorter) const {
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
  void prefer_optimizer_period(Cut& cut, IterationAnalysis& a) const {
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
  std::vector<std::size_t> updates_per_step(const IterationAnalysis& a) const {
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

  // A step cannot start inside a CUDA graph launch (the runtime sees the launch as one unit): a bound on a
  // graph op moves back to its launch's first op on the main stream.
  std::vector<std::size_t> snap_to_launch_units(std::vector<std::size_t> bounds) const {
    for (auto& b : bounds)
      while (b > 0 && b < main_.size() && op(b).graph_id != 0 && op(b - 1).graph_id != 0 &&
             op(b - 1).correlation == op(b).correlation)
        --b;
    bounds.erase(std::unique(bounds.begin(), bounds.end()), bounds.end());
    return bounds;
  }

  // Share of the device's ops that lie in regular steps.
  double covered(const IterationAnalysis& a) const {
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
  void refuse_unlike_marked_steps(const IterationAnalysis& a) const {
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
  void refuse_part_of_longer_repetition(std::size_t p, double score) const {
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

  // Steps, template and the timing rules' exclusions for one cut.
  IterationAnalysis build(const Cut& cut) const {
    IterationAnalysis a;
    a.device = device_;
    a.method = cut.method;
    const std::vector<std::size_t>& bounds = cut.bounds;
    std::size_t p = cut.p;
    const std::size_t n = seq_.size();
    std::size_t start_of_tmpl = bounds.front();
    // Canonical sequence: the first segment with the modal length; for steps that differ inside, the most
    // common step (tmpl_note_ says which).
    std::vector<std::uint32_t> tmpl;
    if (cut.variable) {
      start_of_tmpl = most_common_step(bounds, p);
      tmpl.assign(seq_.begin() + static_cast<std::ptrdiff_t>(start_of_tmpl),
                  seq_.begin() + static_cast<std::ptrdiff_t>(start_of_tmpl + p));
    } else {
      std::map<std::size_t, int> lens;
      for (std::size_t k = 0; k + 1 < bounds.size(); ++k) lens[bounds[k + 1] - bounds[k]]++;
      std::size_t modal = p;
      int c = 0;
      for (auto [l, cnt] : lens)
        if (cnt > c || (cnt == c && l == p)) modal = l, c = cnt;
      for (std::size_t k = 0; k + 1 < bounds.size(); ++k)
        if (bounds[k + 1] - bounds[k] == modal) {
          start_of_tmpl = bounds[k];
          break;
        }
      p = modal;
      tmpl.assign(seq_.begin() + static_cast<std::ptrdiff_t>(start_of_tmpl),
                  seq_.begin() + static_cast<std::ptrdiff_t>(start_of_tmpl + p));
    }
    a.period_ops = p;
    // Segments: between consecutive bounds, plus the tail when it is a whole step.
    std::vector<Seg> segs;
    for (std::size_t k = 0; k + 1 < bounds.size(); ++k) segs.push_back({bounds[k], bounds[k + 1]});
    // (update-delimited steps end with their update: what follows the last one is never a whole step)
    if (!cut.variable && n - bounds.back() >= p && n - bounds.back() <= p + p / 50 + 1) segs.push_back({bounds.back(), n});
    double med_len = 0, med_dur = 0;
    if (cut.variable) {
      std::vector<double> lens, durs;
      for (const Seg& s : segs) {
        lens.push_back(static_cast<double>(s.e - s.b));
        durs.push_back(static_cast<double>(time_at(s.e) - time_at(s.b)));
      }
      med_len = median(lens), med_dur = median(durs);
    }
    if (segs.size() < 2 && cut.method != "step markers")
      throw NoIterationError(fmt::format("found a period of {} ops but fewer than 2 whole steps; the trace "
                                         "needs at least 2 complete training steps",
                                         p));
    std::vector<std::vector<std::int64_t>> maps;
    std::vector<bool> has_suspect;
    std::vector<double> aligned;  // matched share of each regular step
    for (std::size_t k = 0; k < segs.size(); ++k) {
      const Seg& s = segs[k];
      Iteration it;
      it.start_ns = op(s.b).start_ns;
      std::int64_t limit = s.e < n ? op(s.e).start_ns : INT64_MAX;
      auto [first, last] = device_range(it.start_ns, limit);
      it.end_ns = it.start_ns;
      bool suspect = false;
      for (std::size_t i = first; i < last; ++i) {
        const auto& r = trace_.ops[dev_ops_[i]];
        suspect |= r.suspect;
        if (!r.suspect) it.end_ns = std::max(it.end_ns, r.end_ns());
        ++it.op_count;
        if (r.kind == OpKind::kernel) ++it.kernel_count;
      }
      std::size_t len = s.e - s.b;
      std::vector<std::int64_t> m;
      std::size_t matched = 0;
      if (cut.variable) {
        // Regular: near the median step in op count and time, and most of it aligns with the template by name.
        const double need = std::ceil(kUpdateMinAligned * static_cast<double>(std::max(len, p)));
        const double slack = static_cast<double>(len + p) - 2 * need;
        if (slack >= 0 && regular_update_step(static_cast<double>(len), static_cast<double>(time_at(s.e) - time_at(s.b)),
                                              med_len, med_dur))
          m = align_lcs(tmpl, seq_.data() + s.b, len, static_cast<std::size_t>(slack));
        matched = static_cast<std::size_t>(std::count_if(m.begin(), m.end(), [](auto v) { return v >= 0; }));
        it.regular = !m.empty() && static_cast<double>(matched) >= need;
      } else {
        if (len * 5 >= p * 4 && len * 4 <= p * 5) m = align(tmpl, seq_.data() + s.b, len);
        matched = static_cast<std::size_t>(std::count_if(m.begin(), m.end(), [](auto v) { return v >= 0; }));
        it.regular = !m.empty() && matched * 100 >= p * 95;
      }
      if (it.regular) aligned.push_back(static_cast<double>(matched) / static_cast<double>(std::max(len, p)));
      a.iterations.push_back(it);
      maps.push_back(std::move(m));
      has_suspect.push_back(suspect);
    }
    exclude_outliers(a, has_suspect);
    if (!cut.variable) mark_atypical_timing(a, maps, segs);
    mark_atypical_periods(a, segs, maps, cut.variable);
    std::vector<Accum> acc(p);
    std::size_t regular = 0;
    std::vector<double> periods;
    std::vector<std::size_t> period_steps;  // regular steps of typical timing with a next step
    for (std::size_t k = 0; k < segs.size(); ++k) {
      const Iteration& it = a.iterations[k];
      if (!it.regular) continue;
      ++regular;
      // The step's length is typical timing too: a warm-up step 1.5 s long among 196 ms ones (H200 gradient
      // accumulation) put 14 ms into the period, and the runtime's estimates across a step boundary with it.
      if (segs[k].e < n && it.typical_timing) period_steps.push_back(k);
      accumulate_main(acc, maps[k], segs[k].b, it.start_ns, cut.variable, it.typical_timing);
    }
    // A step's period counts towards the template's net of the work the template lacks or adds: main-stream ops
    // it ran that no template position matched (a clipping block) take their time out, template positions it
    // skipped put their mean time in. Else the template idles for the blocks' time, slack a plan spends for
    // nothing (markers and launch events, GPT-2 steps with a 40-op block in 3 of 8: the phase plan's MODELLED
    // saving 5.06 % against 3.30 % without the block; held-out variants, session 28). Exact copies: unchanged.
    for (std::size_t k : period_steps) {
      double period = static_cast<double>(op(segs[k].e).start_ns - a.iterations[k].start_ns);
      if (!cut.variable) {
        period -= unmatched_ns(segs[k], maps[k]);
        for (std::size_t j = 0; j < maps[k].size(); ++j)
          if (maps[k][j] < 0 && acc[j].dur.n > 0) period += acc[j].dur.mean();
      }
      periods.push_back(period);
    }
    // Steps that differ inside: a position matched in few steps (an expert GEMM variant for one token count)
    // would keep its idle time at full weight while the steps that lack it put theirs on a later position, and
    // the template would idle longer than any step. A gap counts as idle per regular step instead (unmatched:
    // none), so the template's idle time is the steps' mean.
    if (cut.variable && regular > 0)
      for (Accum& ac : acc) ac.gap.sum *= static_cast<double>(ac.gap.n) / static_cast<double>(regular);
    if (regular < 2)
      throw NoIterationError(fmt::format("only {} of the {} steps found ({} ops each, by {}) has the step's kernel "
                                         "sequence: no two steps share one; the trace needs at least 2 whole steps "
                                         "that launch the same kernels",
                                         regular, segs.size(), p, cut.method));
    if (regular < 2 && a.evidence.excluded_steps > 0)
      throw NoIterationError(fmt::format(
          "only {} step with plausible timing remains after leaving out {} step(s) with impossible timing "
          "(see the warnings); the trace needs at least 2",
          regular, a.evidence.excluded_steps));
    // The representative records (kind, stream, launch shape) come from the template's own step where it is
    // regular: another step's op at the same index may be another kernel when steps differ inside.
    std::size_t ref = segs.size();
    for (std::size_t k = 0; k < segs.size(); ++k)
      if (segs[k].b == start_of_tmpl && a.iterations[k].regular) ref = k;
    for (std::size_t k = 0; k < segs.size() && ref == segs.size(); ++k)
      if (a.iterations[k].regular) ref = k;
    // Regular steps that are not exact copies of the template (an inserted clipping block, skipped experts)
    // shift their later ops and launches by the block: mean offsets would put the template's launches after
    // its own laid-out GPU work, idle the simulator never saw, which the plan spent as free slowdown (markers
    // and launch events, GPT-2 steps with a 40-op block in 3 of 8: 5.06 % against 3.30 % without it; held-out
    // variants, session 28). Their launches are placed as update-delimited steps' are: at their mean lead before
    // the op's start as the simulator lays it out; their start offsets (the template's op order across streams)
    // stay the means (laid out too, they reordered a Megatron-LM step's streams against every recorded step).
    a.evidence.exact_steps = static_cast<std::size_t>(std::count(aligned.begin(), aligned.end(), 1.0));
    const bool inexact = a.evidence.exact_steps < aligned.size();
    const LayOut lay_out = cut.variable ? LayOut::offsets_and_launches : inexact ? LayOut::launches : LayOut::none;
    build_template(a, tmpl, acc, ref, lay_out, [&](std::size_t k) { return a.iterations[k]; });
    if (periods.empty()) {
      for (const auto& it : a.iterations)
        if (it.regular && it.typical_timing) periods.push_back(static_cast<double>(it.end_ns - it.start_ns));
    }
    a.tmpl.period_ns = std::accumulate(periods.begin(), periods.end(), 0.0) / static_cast<double>(periods.size());
    // Warm-up steps before the first regular one and a partial step after the last do not count against the
    // steps' regularity; irregular steps between them do.
    std::size_t first_regular = segs.size(), last_regular = 0;
    for (std::size_t k = 0; k < segs.size(); ++k)
      if (a.iterations[k].regular) first_regular = std::min(first_regular, k), last_regular = k;
    std::size_t counted = 0;
    for (std::size_t k = first_regular; k < segs.size(); ++k) {
      const bool partial_tail = k > last_regular && segs[k].e - segs[k].b < p;  // the trace ended mid-step
      counted += a.iterations[k].excluded.empty() && !partial_tail;
    }
    // Alignment, not the raw period match: one inserted op shifts every later step by one and halves the raw
    // match of a 3-step trace, while each step still aligns with the template.
    const double alignment = std::accumulate(aligned.begin(), aligned.end(), 0.0) / static_cast<double>(aligned.size());
    a.confidence = alignment * static_cast<double>(regular) / static_cast<double>(std::max<std::size_t>(counted, regular));
    if (cut.variable) {
      // Steps of unequal length place their synchronizes by the launches before them (trace/cpu_timeline.hpp).
      std::vector<StepLaunches> launches;
      for (std::size_t k = 0; k < segs.size(); ++k) {
        if (!a.iterations[k].regular) continue;
        StepLaunches s;
        s.step = k;
        for (std::size_t j = 0; j < maps[k].size(); ++j)
          if (maps[k][j] >= 0)
            if (const auto& r = op(segs[k].b + static_cast<std::size_t>(maps[k][j])); r.launch_ns >= 0)
              s.launches.emplace_back(r.launch_ns, static_cast<std::uint32_t>(j));
        std::sort(s.launches.begin(), s.launches.end());
        launches.push_back(std::move(s));
      }
      attach_cpu_timeline(trace_, a, &launches);
    }
    return a;
  }

  // Timing rules of detection (docs/step-detection.md): a step holding an op with impossible timing, or whose
  // span lies outside [1/kSpanOutlier, kSpanOutlier] x the median span of its regular siblings, is left out.
  void exclude_outliers(IterationAnalysis& a, const std::vector<bool>& has_suspect) const {
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

  // Optimizer updates per regular step: the same non-zero count in every regular step is consistent.
  // Several updates in a step must be different updates (distinct_updates): the same update twice means the
  // period is several training steps.
  bool updates_consistent(IterationAnalysis& a) const {
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
  static std::string inexact_note(const IterationAnalysis& a) {
    if (a.evidence.exact_steps >= a.regular_count()) return {};
    return fmt::format(" ({} exactly; the others differ by a few ops, at most 5 % of its positions)",
                       a.evidence.exact_steps);
  }

  // Whether a step is `parts` repetitions of one op sequence (≥ kLongerRepeatMatch of its main-stream ops match
  // one part later): several training steps in one marked range, not one step running its update per layer.
  bool repeats_within(const Iteration& it, std::size_t parts) const {
    const std::size_t b = first_main_at_or_after(it.start_ns), e = first_main_at_or_after(it.end_ns);
    const std::size_t P = (e - b) / parts;
    if (P == 0 || e <= b + P) return false;
    std::size_t hits = 0;
    for (std::size_t i = b; i + P < e; ++i) hits += seq_[i] == seq_[i + P];
    return static_cast<double>(hits) >= kLongerRepeatMatch * static_cast<double>(e - b - P);
  }

  // The evidence lines, micro-steps, the idle-gap test and the final confidence; throws below the threshold.
  void finish_evidence(IterationAnalysis& a, const Cut& first_cut) const {
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
    double factor = 1.0;
    // Idle gaps at the boundaries are no evidence: an eager forward idles between layers as long as a decode
    // loop between tokens (H200 traces, docs/step-detection.md).
    if (a.method != "step markers" && ev.optimizer_updates == 0 && !markers_agree && !framework_update) {
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
  bool framework_update_agrees(IterationAnalysis& a) const {
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

  // Where CPU step markers exist but cannot cut steps (no launch times), the period's steps must not outnumber
  // them: several detected steps inside one marked step means the period is a part of the step.
  // Returns whether they agree: about one detected step per marked step.
  bool cross_check_markers(IterationAnalysis& a) const {
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
  std::size_t micro_steps(const IterationAnalysis& a) const {
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

  std::string optimizer_name() const {
    const std::string& n = trace_.names[seq_[opt_blocks_.front().first]];
    return n.size() > 50 ? n.substr(0, 47) + "..." : n;
  }

  // Optimizer updates on the main stream: maximal runs of optimizer kernels, allowing up to `max_gap` other ops
  // between them (the scalar and norm kernels of clipping and AMP unscaling). [first, one past last] main
  // indices. Steps of a few ops would merge every update into one, so counting per step uses a gap of at
  // most a quarter of the step.
  std::vector<std::pair<std::size_t, std::size_t>> optimizer_blocks(std::size_t max_gap) const {
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

  struct Seg {
    std::size_t b, e;
  };

 private:
  const OpRecord& op(std::size_t main_index) const { return trace_.ops[main_[main_index]]; }

  void select_device_and_stream() {
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

  // Kernels carry launch times when the trace recorded launch calls (copies and memsets go through other APIs).
  bool have_launch_times() const {
    std::size_t with = 0, kernels = 0;
    for (std::size_t i : main_) {
      const auto& r = trace_.ops[i];
      if (r.kind != OpKind::kernel) continue;
      ++kernels;
      with += r.launch_ns >= 0;
    }
    return kernels > 0 && with * 10 >= kernels * 9;
  }

  // Step markers (ProfilerStep#N, NVTX gearshift.step) are CPU-side ranges: they define steps only where the
  // trace maps each kernel to the CPU time of its launch (correlation with runtime API events, or gearshift's
  // own tracer). By GPU time alone they cannot: a GPU that lags its CPU (waiting in a collective) runs the last
  // kernels of step k well after marker k+1 began. GPU-side copies of the markers in torch 2.x traces are
  // instants placed mid-step, not at the step's first kernel. Without launch times the kernel stream decides.
  std::vector<const Marker*> select_markers() const {
    std::vector<const Marker*> cpu;
    if (!opt_.use_markers || !have_launch_times()) return {};
    for (const auto& m : trace_.markers)
      if (!m.on_gpu) cpu.push_back(&m);
    return cpu.size() >= 2 ? cpu : std::vector<const Marker*>{};
  }

  std::size_t first_main_at_or_after(std::int64_t t) const {
    auto it = std::lower_bound(main_.begin(), main_.end(), t,
                               [&](std::size_t i, std::int64_t v) { return trace_.ops[i].start_ns < v; });
    return static_cast<std::size_t>(it - main_.begin());
  }

  // First main-stream op that belongs to a step starting at `t` on the marker's timeline.
  std::size_t first_main_in_step(std::int64_t t, bool by_launch) const {
    if (!by_launch) return first_main_at_or_after(t);
    for (std::size_t i = 0; i < main_.size(); ++i) {
      const auto& r = trace_.ops[main_[i]];
      if (r.launch_ns < 0 || r.launch_ns < t) continue;
      // Ops without launch times right before it (copies, memsets) that started after the marker belong here.
      while (i > 0) {
        const auto& prev = trace_.ops[main_[i - 1]];
        if (prev.kind == OpKind::kernel || prev.launch_ns >= 0 || prev.start_ns < t) break;
        --i;
      }
      return i;
    }
    return main_.size();
  }

  std::vector<std::size_t> marker_bounds(std::size_t& p) const {
    std::vector<std::size_t> b;
    auto ms = select_markers();
    const bool by_launch = true;
    for (const Marker* m : ms) {
      std::size_t i = first_main_in_step(m->start_ns, by_launch);
      if (i < seq_.size() && (b.empty() || i > b.back())) b.push_back(i);
    }
    std::size_t end = first_main_in_step(ms.back()->start_ns + std::max<std::int64_t>(ms.back()->duration_ns, 1), by_launch);
    if (!b.empty() && end > b.back()) b.push_back(end);
    std::vector<std::size_t> lens;
    for (std::size_t k = 0; k + 1 < b.size(); ++k) lens.push_back(b[k + 1] - b[k]);
    std::sort(lens.begin(), lens.end());
    p = lens.empty() ? 0 : lens[lens.size() / 2];
    seq_end_ = end;  // ops after the last marker's end belong to no recorded step
    return b;
  }

  double match(std::size_t p) const {
    const std::size_t n = seq_.size();
    std::size_t hits = 0;
    for (std::size_t i = 0; i + p < n; ++i) hits += seq_[i] == seq_[i + p];
    return static_cast<double>(hits) / static_cast<double>(n - p);
  }

  // Positions of every op that occurs at least twice on the main stream, the rarest ops first (an op that
  // occurs once per step gives the step's length).
  std::vector<std::vector<std::size_t>> occurrences_by_rarity() const {
    std::unordered_map<std::uint32_t, std::vector<std::size_t>> pos;
    for (std::size_t i = 0; i < seq_.size(); ++i) pos[seq_[i]].push_back(i);
    std::vector<std::vector<std::size_t>> by_count;
    for (auto& [sym, v] : pos)
      if (v.size() >= 2) by_count.push_back(std::move(v));
    std::sort(by_count.begin(), by_count.end(), [](const auto& x, const auto& y) {
      return x.size() != y.size() ? x.size() < y.size() : x.front() < y.front();
    });
    return by_count;
  }

  std::size_t find_period(double& score) const {
    const std::size_t n = seq_.size();
    if (n < 4) throw NoIterationError(fmt::format("only {} ops on the busiest stream: too few to hold 2 steps", n));
    const auto by_count = occurrences_by_rarity();
    std::set<std::size_t> cands;
    for (const auto& v : by_count) {
      for (std::size_t k = 0; k + 1 < v.size(); ++k) {
        std::size_t d = v[k + 1] - v[k];
        if (d >= 1 && 2 * d <= n) cands.insert(d);
      }
      if (cands.size() >= opt_.max_candidates) break;
    }
    if (cands.empty()) throw NoIterationError("no op repeats within the trace: no iteration to find");
    std::vector<std::pair<std::size_t, double>> scored;
    double best = 0;
    for (std::size_t p : cands) {
      double m = match(p);
      scored.emplace_back(p, m);
      best = std::max(best, m);
    }
    if (best < 0.5)
      throw NoIterationError(fmt::format("no repeating op sequence: the best period matched {:.0f} % of ops; the "
                                         "trace needs at least 2 complete training steps",
                                         100 * best));
    for (auto [p, m] : scored)  // ascending p: the smallest near-best period (multiples score as well)
      if (m >= best - 0.01) {
        score = m;
        return p;
      }
    return scored.back().first;
  }

  static bool is_optimizer(const std::string& name) { return is_optimizer_kernel(name); }

  // Where a step starts within the period. A training step ends with the optimizer: the boundary goes right
  // after the last optimizer kernel of the period (the block followed by the longest idle gap when there are
  // several). Without optimizer kernels: at the trace start when it holds whole periods (profilers start
  // recording at a step boundary), else where the GPU idles longest between repeats.
  std::size_t best_offset(std::size_t p) const {
    const std::size_t n = seq_.size();
    std::vector<double> gap(n, 0);
    std::int64_t prev_end = op(0).end_ns();
    for (std::size_t i = 1; i < n; ++i) {
      gap[i] = static_cast<double>(op(i).start_ns - prev_end);
      prev_end = std::max(prev_end, op(i).end_ns());
    }
    auto mean_gap = [&](std::size_t o) {
      double s = 0;
      int c = 0;
      for (std::size_t i = o; i < n; i += p)
        if (i > 0) s += gap[i], ++c;
      return c ? s / c : -1e300;
    };
    // The reference period: the window that best matches the next one (the first steps are often warm-up).
    std::size_t r = 0, r_hits = 0;
    for (std::size_t w = 0; w + 2 * p <= n; w += p) {
      std::size_t hits = 0;
      for (std::size_t j = 0; j < p; ++j) hits += seq_[w + j] == seq_[w + p + j];
      if (hits > r_hits) r_hits = hits, r = w;
    }
    // Positions of the reference period that end an optimizer block.
    std::vector<std::size_t> ends;
    for (std::size_t j = r; j < r + p; ++j) {
      if (is_optimizer(trace_.names[seq_[j]]) && !is_optimizer(trace_.names[seq_[j + 1]])) ends.push_back(j + 1);
    }
    if (!ends.empty()) {
      std::size_t best_o = ends.front();
      double best = -1e300;
      for (std::size_t o : ends) {
        double g = mean_gap(o);
        if (g > best) best = g, best_o = o;
      }
      return best_o;
    }
    std::size_t rem = n % p;
    if (rem * 50 <= p) return 0;
    std::size_t best_o = r;
    double best = -1e300;
    for (std::size_t o = r; o < r + p; ++o) {
      double mean = mean_gap(o);
      if (mean > best + 1e-9) best = mean, best_o = o;
    }
    return best_o;
  }

  // Step starts: occurrences of the step's first ops (its signature), each the one nearest a period after the
  // previous start, so that a repeat of those ops inside a step is not taken for a new step.
  std::vector<std::size_t> signature_bounds(std::size_t o, std::size_t p) const {
    const std::size_t n = seq_.size();
    const std::size_t k = std::clamp<std::size_t>(p / 4, 1, 8);
    std::vector<std::size_t> hits;
    for (std::size_t i = 0; i + k <= n; ++i)
      if (std::equal(seq_.begin() + static_cast<std::ptrdiff_t>(i), seq_.begin() + static_cast<std::ptrdiff_t>(i + k),
                     seq_.begin() + static_cast<std::ptrdiff_t>(o)))
        hits.push_back(i);
    std::vector<std::size_t> b;
    if (hits.empty()) return b;
    b.push_back(hits.front());
    for (;;) {
      const std::size_t expect = b.back() + p;
      std::size_t best = n;
      for (std::size_t h : hits) {
        if (h <= b.back() + p / 2) continue;
        auto dist = [&](std::size_t x) { return x > expect ? x - expect : expect - x; };
        if (best == n || dist(h) < dist(best)) best = h;
        if (h > expect + p) break;
      }
      if (best == n) break;
      b.push_back(best);
    }
    return b;
  }

  std::pair<std::size_t, std::size_t> device_range(std::int64_t from, std::int64_t to) const {
    auto lo = std::lower_bound(dev_ops_.begin(), dev_ops_.end(), from,
                               [&](std::size_t i, std::int64_t v) { return trace_.ops[i].start_ns < v; });
    auto hi = std::lower_bound(lo, dev_ops_.end(), to,
                               [&](std::size_t i, std::int64_t v) { return trace_.ops[i].start_ns < v; });
    if (seq_end_ > 0 && seq_end_ < main_.size() && to == INT64_MAX) {
      std::int64_t cap = op(seq_end_).start_ns;
      hi = std::lower_bound(lo, dev_ops_.end(), cap,
                            [&](std::size_t i, std::int64_t v) { return trace_.ops[i].start_ns < v; });
    }
    return {static_cast<std::size_t>(lo - dev_ops_.begin()), static_cast<std::size_t>(hi - dev_ops_.begin())};
  }

  // `since_matched`: a position's gap is the stream's idle time since the op matched to the previous position
  // (steps that differ inside: the idle time around inserted kernels, a D2H sync of the routing, stays in the
  // step instead of being lost with the kernels the template lacks).
  // Main-stream positions of `m` (a step's map from template positions to its ops from b on) into `acc`. A step
  // of atypical timing adds its durations and clocks only.
  void accumulate_main(std::vector<Accum>& acc, const std::vector<std::int64_t>& m, std::size_t b,
                       std::int64_t step_start, bool since_matched, bool timing) const {
    auto idle_before = [&](std::size_t i) {
      return i > b ? static_cast<double>(std::max<std::int64_t>(0, op(i).start_ns - op(i - 1).end_ns())) : 0.0;
    };
    std::size_t prev = b;  // main index of the last matched op
    for (std::size_t j = 0; j < m.size(); ++j) {
      if (m[j] < 0) continue;
      std::size_t i = b + static_cast<std::size_t>(m[j]);
      const auto& r = op(i);
      acc[j].dur.add(static_cast<double>(r.duration_ns));
      acc[j].sm[r.sm_clock_mhz]++;
      acc[j].mem[r.mem_clock_mhz]++;
      if (!timing) {
        prev = i;
        continue;
      }
      acc[j].offset.add(static_cast<double>(r.start_ns - step_start));
      if (r.launch_ns >= 0) acc[j].launch.add(static_cast<double>(r.launch_ns - step_start));
      double g = idle_before(i);
      if (since_matched)
        for (std::size_t q = prev + 1; q < i; ++q) g += idle_before(q);
      prev = i;
      acc[j].gap.add(g);
    }
  }

  // Marks regular steps whose ops ran far from where the other steps' did (Iteration::typical_timing). The first
  // step after CUDA's lazy initialisation has the job's kernel sequence but not its timing: in a mean its offsets
  // put every later position milliseconds late in every typical step, and the runtime issued its clock changes
  // for those estimates (H200 gradient accumulation: a 1.75 s first step among 170-199 ms ones moved the period
  // and the late offsets by 14 ms; docs/benchmarks.md, session 16). A step's distance is the mean |offset -
  // median offset| over its matched positions.
  void mark_atypical_timing(IterationAnalysis& a, const std::vector<std::vector<std::int64_t>>& maps,
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
  void mark_atypical_periods(IterationAnalysis& a, const std::vector<Seg>& segs,
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

  // The time of a step's main-stream ops that no template position matched (`m`: its map), ns.
  double unmatched_ns(const Seg& s, const std::vector<std::int64_t>& m) const {
    std::vector<bool> used(s.e - s.b, false);
    for (std::int64_t i : m)
      if (i >= 0) used[static_cast<std::size_t>(i)] = true;
    double ns = 0;
    for (std::size_t i = 0; i < used.size(); ++i)
      if (!used[i]) ns += static_cast<double>(op(s.b + i).duration_ns);
    return ns;
  }

  // What build_template lays out from the mean durations and gaps (the simulator's timeline) instead of the
  // steps' mean offsets.
  enum class LayOut { none, launches, offsets_and_launches };

  template <typename GetIteration>
  void build_template(IterationAnalysis& a, const std::vector<std::uint32_t>& tmpl, const std::vector<Accum>& acc,
                      std::size_t ref_k, LayOut lay_out, GetIteration get) const {
    IterationTemplate& t = a.tmpl;
    t.main_stream = stream_;
    const std::size_t nseg = a.iterations.size();
    // Main-stream positions: the representative record comes from the reference step (regular).
    const std::size_t first_regular = ref_k;
    const Iteration& ref = get(first_regular);
    std::size_t ref_main = first_main_at_or_after(ref.start_ns);
    for (std::size_t j = 0; j < tmpl.size(); ++j) {
      const OpRecord& r = op(ref_main + j < main_.size() ? ref_main + j : main_.size() - 1);
      TemplateOp to = from_stats(r, acc[j]);
      to.name_id = tmpl[j];
      if (r.launch_ns >= 0) to.ref_launch_ns = static_cast<double>(r.launch_ns - ref.start_ns);
      t.ops.push_back(to);
    }
    // Other streams (communication, copies): positional per stream, steps with the same per-stream sequence.
    std::map<std::int32_t, std::vector<std::size_t>> ref_other;
    {
      auto [lo, hi] = device_range(ref.start_ns, next_start(a, first_regular));
      for (std::size_t i = lo; i < hi; ++i) {
        const auto& r = trace_.ops[dev_ops_[i]];
        if (r.stream != stream_) ref_other[r.stream].push_back(dev_ops_[i]);
      }
    }
    std::size_t regular = 0;
    for (std::size_t k = 0; k < nseg; ++k) regular += get(k).regular ? 1 : 0;
    for (auto& [stream, ref_ops] : ref_other) {
      std::vector<Accum> sacc(ref_ops.size());
      for (std::size_t k = 0; k < nseg; ++k) {
        const Iteration& it = get(k);
        if (!it.regular || !it.typical_timing) continue;
        auto [lo, hi] = device_range(it.start_ns, next_start(a, k));
        std::vector<std::size_t> mine;
        for (std::size_t i = lo; i < hi; ++i)
          if (trace_.ops[dev_ops_[i]].stream == stream) mine.push_back(dev_ops_[i]);
        if (mine.size() != ref_ops.size()) continue;
        bool same = true;
        for (std::size_t q = 0; q < mine.size() && same; ++q)
          same = trace_.ops[mine[q]].name_id == trace_.ops[ref_ops[q]].name_id;
        if (!same) continue;
        for (std::size_t q = 0; q < mine.size(); ++q) {
          const auto& r = trace_.ops[mine[q]];
          sacc[q].dur.add(static_cast<double>(r.duration_ns));
          sacc[q].offset.add(static_cast<double>(r.start_ns - it.start_ns));
          if (r.launch_ns >= 0) sacc[q].launch.add(static_cast<double>(r.launch_ns - it.start_ns));
          double g = q == 0 ? static_cast<double>(r.start_ns - it.start_ns)
                            : static_cast<double>(std::max<std::int64_t>(0, r.start_ns - trace_.ops[mine[q - 1]].end_ns()));
          sacc[q].gap.add(g);
          sacc[q].sm[r.sm_clock_mhz]++;
          sacc[q].mem[r.mem_clock_mhz]++;
        }
      }
      for (std::size_t q = 0; q < ref_ops.size(); ++q) {
        // Work another stream does in only some steps (a warm-up copy, a one-off memset) is not part of the
        // step: kept, it would be simulated in every step at its one offset (measured: two memsets of the first
        // step of a gradient-checkpointing job tripled the modelled step).
        if (sacc[q].dur.n == 0 || 2 * sacc[q].dur.n < regular) continue;
        TemplateOp to = from_stats(trace_.ops[ref_ops[q]], sacc[q]);
        if (trace_.ops[ref_ops[q]].launch_ns >= 0)
          to.ref_launch_ns = static_cast<double>(trace_.ops[ref_ops[q]].launch_ns - ref.start_ns);
        t.ops.push_back(to);
      }
    }
    if (lay_out != LayOut::none) {
      // Steps of unequal length (a CPU-bound expert loop takes 120–280 ms) make a position's mean start offset
      // depend on which steps matched it: the main stream keeps the template's order, its offsets follow from
      // the mean durations and gaps as the simulator lays them out. A launch keeps its mean lead on its op's
      // start (a relation within each step), so it moves with the laid-out start.
      double at = 0;
      for (std::size_t j = 0; j < tmpl.size(); ++j) {
        at += t.ops[j].gap_before_ns;
        t.ops[j].launch_offset_ns += at - t.ops[j].start_offset_ns;
        if (lay_out == LayOut::offsets_and_launches) t.ops[j].start_offset_ns = at;
        at += t.ops[j].duration_ns;
      }
    }
    std::stable_sort(t.ops.begin(), t.ops.end(),
                     [](const TemplateOp& x, const TemplateOp& y) { return x.start_offset_ns < y.start_offset_ns; });
    t.kernels = static_cast<std::size_t>(
        std::count_if(t.ops.begin(), t.ops.end(), [](const TemplateOp& o) { return o.kind == OpKind::kernel; }));
    number_graph_launches(t);
  }

  std::int64_t next_start(const IterationAnalysis& a, std::size_t k) const {
    return k + 1 < a.iterations.size() ? a.iterations[k + 1].start_ns : INT64_MAX;
  }

  static TemplateOp from_stats(const OpRecord& r, const Accum& s) {
    TemplateOp to;
    to.name_id = r.name_id;
    to.kind = r.kind;
    to.stream = r.stream;
    to.grid = r.grid;
    to.block = r.block;
    to.duration_ns = s.dur.n ? s.dur.mean() : static_cast<double>(r.duration_ns);
    to.duration_stdev_ns = s.dur.stdev();
    to.duration_min_ns = s.dur.n ? s.dur.lo : to.duration_ns;
    to.duration_max_ns = s.dur.n ? s.dur.hi : to.duration_ns;
    to.start_offset_ns = s.offset.mean();
    to.gap_before_ns = s.gap.mean();
    // Known only when every step that contributed knew it (a mean of some steps' launches would not match the
    // mean start of all of them).
    to.launch_known = s.launch.n > 0 && s.launch.n == s.dur.n;
    to.launch_offset_ns = to.launch_known ? s.launch.mean() : 0;  // = mean start − mean lead of the launch
    to.sm_clock_mhz = mode(s.sm);
    to.mem_clock_mhz = mode(s.mem);
    to.samples = s.dur.n;
    to.graph_id = r.graph_id;
    to.graph_launch = r.graph_id != 0 ? r.correlation : -1;  // numbered by number_graph_launches
    return to;
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

}  // namespace

std::size_t IterationAnalysis::regular_count() const {
  return static_cast<std::size_t>(std::count_if(iterations.begin(), iterations.end(), [](auto& i) { return i.regular; }));
}

IterationAnalysis detect_iterations(const Trace& trace, const IterationOptions& options) {
  IterationAnalysis a = Detector(trace, options).run();
  if (a.method != "optimizer updates") attach_cpu_timeline(trace, a);  // update-delimited: placed while built
  return a;
}

}  // namespace gearshift::trace
