#include "trace/iteration.hpp"
#include "trace/kernel_names.hpp"

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
  std::map<std::int32_t, int> sm, mem;
};

int mode(const std::map<std::int32_t, int>& m) {
  int best = 0, count = 0;
  for (auto [k, c] : m)
    if (c > count && k > 0) best = k, count = c;
  return best;
}

class Detector {
 public:
  Detector(const Trace& t, const IterationOptions& o) : trace_(t), opt_(o) {}

  IterationAnalysis run() {
    select_device_and_stream();
    IterationAnalysis a;
    a.device = device_;
    std::vector<std::size_t> bounds;
    std::size_t p = 0;
    double score = 1.0;
    if (!select_markers().empty()) {
      a.method = "step markers";
      bounds = marker_bounds(p);
      if (bounds.size() < 2) throw NoIterationError("the trace's step markers cover fewer than 2 steps");
    } else {
      a.method = "kernel-stream period";
      p = find_period(score);
      std::size_t o = best_offset(p);
      // Ops right at a step boundary (data copies, one-off memsets) are the least stable: when the step's
      // first ops do not repeat, start the signature a little later.
      const std::size_t expected = seq_.size() / p;
      for (std::size_t d = 0; d <= std::max<std::size_t>(16, p / 10) && d < p; ++d) {
        bounds = signature_bounds(o + d, p);
        if (bounds.size() + 1 >= expected && bounds.size() >= 2) break;
      }
      if (bounds.size() < 2)
        throw NoIterationError(fmt::format("found a period of {} ops but no step start that repeats", p));
    }
    const std::size_t n = seq_.size();
    std::size_t start_of_tmpl = bounds.front();
    // Canonical sequence: the first segment with the modal length.
    std::vector<std::uint32_t> tmpl;
    {
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
    struct Seg {
      std::size_t b, e;
    };
    std::vector<Seg> segs;
    for (std::size_t k = 0; k + 1 < bounds.size(); ++k) segs.push_back({bounds[k], bounds[k + 1]});
    if (n - bounds.back() >= p && n - bounds.back() <= p + p / 50 + 1) segs.push_back({bounds.back(), n});
    if (segs.size() < 2 && a.method != "step markers")
      throw NoIterationError(fmt::format("found a period of {} ops but fewer than 2 whole steps; the trace "
                                         "needs at least 2 complete training steps",
                                         p));
    std::vector<Accum> acc(p);
    std::vector<std::vector<std::int64_t>> maps;
    std::size_t regular = 0;
    std::vector<double> periods;
    for (std::size_t k = 0; k < segs.size(); ++k) {
      const Seg& s = segs[k];
      Iteration it;
      it.start_ns = op(s.b).start_ns;
      std::int64_t limit = s.e < n ? op(s.e).start_ns : INT64_MAX;
      auto [first, last] = device_range(it.start_ns, limit);
      it.end_ns = it.start_ns;
      for (std::size_t i = first; i < last; ++i) {
        const auto& r = trace_.ops[dev_ops_[i]];
        it.end_ns = std::max(it.end_ns, r.end_ns());
        ++it.op_count;
        if (r.kind == OpKind::kernel) ++it.kernel_count;
      }
      std::size_t len = s.e - s.b;
      std::vector<std::int64_t> m;
      if (len * 5 >= p * 4 && len * 4 <= p * 5) m = align(tmpl, seq_.data() + s.b, len);
      std::size_t matched = static_cast<std::size_t>(std::count_if(m.begin(), m.end(), [](auto v) { return v >= 0; }));
      it.regular = !m.empty() && matched * 100 >= p * 95;
      if (it.regular) {
        ++regular;
        if (s.e < n) periods.push_back(static_cast<double>(op(s.e).start_ns - it.start_ns));
        accumulate_main(acc, m, s.b, it.start_ns);
      }
      a.iterations.push_back(it);
      maps.push_back(std::move(m));
    }
    if (regular == 0) throw NoIterationError("no two steps share the same kernel sequence");
    build_template(a, tmpl, acc, segs.size(), [&](std::size_t k) { return a.iterations[k]; });
    if (periods.empty()) {
      for (const auto& it : a.iterations)
        if (it.regular) periods.push_back(static_cast<double>(it.end_ns - it.start_ns));
    }
    a.tmpl.period_ns = std::accumulate(periods.begin(), periods.end(), 0.0) / static_cast<double>(periods.size());
    a.confidence = score * static_cast<double>(regular) / static_cast<double>(segs.size());
    return a;
  }

 private:
  const OpRecord& op(std::size_t main_index) const { return trace_.ops[main_[main_index]]; }

  void select_device_and_stream() {
    std::map<int, std::size_t> per_device;
    for (const auto& r : trace_.ops)
      if (r.kind == OpKind::kernel) per_device[r.device]++;
    if (per_device.empty()) throw NoIterationError("the trace holds no kernels");
    device_ = opt_.device;
    if (device_ < 0) {
      device_ = std::max_element(per_device.begin(), per_device.end(),
                                 [](auto& x, auto& y) { return x.second < y.second; })
                    ->first;
    } else if (!per_device.count(device_)) {
      throw NoIterationError(fmt::format("the trace holds no kernels of device {}", device_));
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

  std::size_t find_period(double& score) const {
    const std::size_t n = seq_.size();
    if (n < 4) throw NoIterationError(fmt::format("only {} ops on the busiest stream: too few to hold 2 steps", n));
    std::unordered_map<std::uint32_t, std::vector<std::size_t>> pos;
    for (std::size_t i = 0; i < n; ++i) pos[seq_[i]].push_back(i);
    std::vector<const std::vector<std::size_t>*> by_count;
    for (auto& [sym, v] : pos)
      if (v.size() >= 2) by_count.push_back(&v);
    std::sort(by_count.begin(), by_count.end(), [](auto* x, auto* y) {
      return x->size() != y->size() ? x->size() < y->size() : x->front() < y->front();
    });
    std::set<std::size_t> cands;
    for (auto* v : by_count) {
      for (std::size_t k = 0; k + 1 < v->size(); ++k) {
        std::size_t d = (*v)[k + 1] - (*v)[k];
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

  void accumulate_main(std::vector<Accum>& acc, const std::vector<std::int64_t>& m, std::size_t b,
                       std::int64_t step_start) const {
    for (std::size_t j = 0; j < m.size(); ++j) {
      if (m[j] < 0) continue;
      std::size_t i = b + static_cast<std::size_t>(m[j]);
      const auto& r = op(i);
      acc[j].dur.add(static_cast<double>(r.duration_ns));
      acc[j].offset.add(static_cast<double>(r.start_ns - step_start));
      double g = 0;
      if (i > b) g = static_cast<double>(std::max<std::int64_t>(0, r.start_ns - op(i - 1).end_ns()));
      acc[j].gap.add(g);
      acc[j].sm[r.sm_clock_mhz]++;
      acc[j].mem[r.mem_clock_mhz]++;
    }
  }

  template <typename GetIteration>
  void build_template(IterationAnalysis& a, const std::vector<std::uint32_t>& tmpl, const std::vector<Accum>& acc,
                      std::size_t nseg, GetIteration get) const {
    IterationTemplate& t = a.tmpl;
    t.main_stream = stream_;
    // Main-stream positions: the representative record comes from the first regular step.
    std::size_t first_regular = 0;
    while (first_regular < nseg && !get(first_regular).regular) ++first_regular;
    const Iteration& ref = get(first_regular);
    std::size_t ref_main = first_main_at_or_after(ref.start_ns);
    for (std::size_t j = 0; j < tmpl.size(); ++j) {
      const OpRecord& r = op(ref_main + j < main_.size() ? ref_main + j : main_.size() - 1);
      TemplateOp to = from_stats(r, acc[j]);
      to.name_id = tmpl[j];
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
    for (auto& [stream, ref_ops] : ref_other) {
      std::vector<Accum> sacc(ref_ops.size());
      for (std::size_t k = 0; k < nseg; ++k) {
        const Iteration& it = get(k);
        if (!it.regular) continue;
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
          double g = q == 0 ? static_cast<double>(r.start_ns - it.start_ns)
                            : static_cast<double>(std::max<std::int64_t>(0, r.start_ns - trace_.ops[mine[q - 1]].end_ns()));
          sacc[q].gap.add(g);
          sacc[q].sm[r.sm_clock_mhz]++;
          sacc[q].mem[r.mem_clock_mhz]++;
        }
      }
      for (std::size_t q = 0; q < ref_ops.size(); ++q) {
        if (sacc[q].dur.n == 0) continue;
        TemplateOp to = from_stats(trace_.ops[ref_ops[q]], sacc[q]);
        t.ops.push_back(to);
      }
    }
    std::stable_sort(t.ops.begin(), t.ops.end(),
                     [](const TemplateOp& x, const TemplateOp& y) { return x.start_offset_ns < y.start_offset_ns; });
    t.kernels = static_cast<std::size_t>(
        std::count_if(t.ops.begin(), t.ops.end(), [](const TemplateOp& o) { return o.kind == OpKind::kernel; }));
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
    to.sm_clock_mhz = mode(s.sm);
    to.mem_clock_mhz = mode(s.mem);
    to.samples = s.dur.n;
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
};

}  // namespace

std::size_t IterationAnalysis::regular_count() const {
  return static_cast<std::size_t>(std::count_if(iterations.begin(), iterations.end(), [](auto& i) { return i.regular; }));
}

IterationAnalysis detect_iterations(const Trace& trace, const IterationOptions& options) {
  return Detector(trace, options).run();
}

}  // namespace gearshift::trace
