// The steps of one cut and the iteration template built from them: each step's alignment with the template,
// the per-position statistics over the steps, and the template's ops on every stream.
#include "trace/step/detector.hpp"
#include "trace/cpu_timeline.hpp"
#include "trace/graph_units.hpp"
#include "trace/sequence_align.hpp"

#include <algorithm>
#include <cmath>
#include <map>
#include <numeric>

#include <fmt/format.h>

namespace gearshift::trace::step_detail {

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

int mode(const std::map<std::int32_t, int>& m) {
  int best = 0, count = 0;
  for (auto [k, c] : m)
    if (c > count && k > 0) best = k, count = c;
  return best;
}

}  // namespace

// Steps, template and the timing rules' exclusions for one cut.
IterationAnalysis Detector::build(const Cut& cut) const {
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

std::pair<std::size_t, std::size_t> Detector::device_range(std::int64_t from, std::int64_t to) const {
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
void Detector::accumulate_main(std::vector<Accum>& acc, const std::vector<std::int64_t>& m, std::size_t b,
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

// The time of a step's main-stream ops that no template position matched (`m`: its map), ns.
double Detector::unmatched_ns(const Seg& s, const std::vector<std::int64_t>& m) const {
  std::vector<bool> used(s.e - s.b, false);
  for (std::int64_t i : m)
    if (i >= 0) used[static_cast<std::size_t>(i)] = true;
  double ns = 0;
  for (std::size_t i = 0; i < used.size(); ++i)
    if (!used[i]) ns += static_cast<double>(op(s.b + i).duration_ns);
  return ns;
}

template <typename GetIteration>
void Detector::build_template(IterationAnalysis& a, const std::vector<std::uint32_t>& tmpl,
                              const std::vector<Accum>& acc, std::size_t ref_k, LayOut lay_out,
                              GetIteration get) const {
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

std::int64_t Detector::next_start(const IterationAnalysis& a, std::size_t k) const {
  return k + 1 < a.iterations.size() ? a.iterations[k + 1].start_ns : INT64_MAX;
}

TemplateOp Detector::from_stats(const OpRecord& r, const Accum& s) {
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

}  // namespace gearshift::trace::step_detail
