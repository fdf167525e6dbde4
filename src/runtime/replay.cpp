#include "runtime/replay.hpp"

#include <algorithm>
#include <bit>
#include <cmath>
#include <limits>
#include <random>
#include <cstdio>
#include <cstdlib>
#include <set>
#include <sstream>
#include <unordered_map>
#include <stdexcept>

#include <fmt/format.h>

#include "plan/plan_file.hpp"
#include "trace/graph_units.hpp"
#include "runtime/runtime_core.hpp"
#include "trace/iteration.hpp"

namespace gearshift::runtime {

Perturbation parse_perturbation(const std::string& text) {
  Perturbation p;
  std::stringstream ss(text);
  std::string item;
  while (std::getline(ss, item, ',')) {
    if (item.empty()) continue;
    auto eq = item.find('=');
    if (eq == std::string::npos) throw std::invalid_argument("perturbation '" + item + "': expected KEY=P");
    std::string key = item.substr(0, eq), val = item.substr(eq + 1);
    double scale = 1;
    if (!val.empty() && val.back() == '%') {
      val.pop_back();
      scale = 0.01;
    }
    double v = 0;
    try {
      std::size_t used = 0;
      v = std::stod(val, &used) * scale;
      if (used != val.size()) throw std::invalid_argument("");
    } catch (const std::exception&) {
      throw std::invalid_argument("perturbation '" + item + "': not a number");
    }
    if (!(v >= 0 && v <= 1)) throw std::invalid_argument("perturbation '" + item + "': must be in 0..1");
    if (key == "drop") p.drop = v;
    else if (key == "insert") p.insert = v;
    else if (key == "swap") p.swap = v;
    else throw std::invalid_argument("perturbation '" + item + "': unknown kind (drop, insert, swap)");
  }
  return p;
}

namespace {

struct ReplayOp {
  std::int32_t id = -1;     // template id (predictor's), -1 unknown
  model::KernelClass cls = model::KernelClass::other;  // for the predictor's substitutions
  bool kernel = true;
  double launch = 0, start = 0, end = 0;  // ns
  std::int64_t truth_pos = -1;            // template position, -1 none
  std::int64_t truth_step = -1;
  std::int64_t correlation = -1;          // the trace's launch correlation, -1 unknown (inserted ops)
};

// LCS alignment of one step's op names to the plan's; writes matched positions into truth. The table at(i, j) =
// LCS of ops[0, i) and tmpl[0, j) is kept bit-parallel (Allison & Dix 1986, Hyyrö 2004): row i as one bit per
// column, set where at(i, j + 1) = at(i, j) + 1, so at(i, j) counts the bits below j. That is n / 64 words a
// row instead of n two-byte cells (a 5,000-op step took 58 MB), and the backtrack reads the same values, so the
// alignment is the same.
void align_step(const std::vector<std::int32_t>& ops, const std::vector<std::int32_t>& tmpl,
                std::vector<std::int64_t>& truth) {
  const std::size_t m = ops.size(), n = tmpl.size(), words = (n + 63) / 64;
  std::unordered_map<std::int32_t, std::vector<std::uint64_t>> where;  // op id -> its columns in tmpl
  for (std::size_t j = 0; j < n; ++j) {
    if (tmpl[j] < 0) continue;  // an unknown op matches nothing
    auto& bits = where[tmpl[j]];
    if (bits.empty()) bits.assign(words, 0);
    bits[j / 64] |= std::uint64_t{1} << (j % 64);
  }
  std::vector<std::uint64_t> rows((m + 1) * words, 0);  // row 0: at(0, j) = 0
  std::vector<std::uint64_t> v(words, ~std::uint64_t{0});  // the current row's bits, complemented
  for (std::size_t i = 1; i <= m; ++i) {
    const auto it = ops[i - 1] >= 0 ? where.find(ops[i - 1]) : where.end();
    if (it != where.end()) {
      // v = (v + u) | (v − u) with u = v & match (u is within v, so v − u = v & ~u); the sum carries across words.
      std::uint64_t carry = 0;
      for (std::size_t w = 0; w < words; ++w) {
        const std::uint64_t u = v[w] & it->second[w];
        const std::uint64_t sum = v[w] + u, total = sum + carry;
        const std::uint64_t next_carry = (sum < v[w]) | (total < sum);
        v[w] = total | (v[w] & ~u);
        carry = next_carry;
      }
    }
    for (std::size_t w = 0; w < words; ++w) rows[i * words + w] = ~v[w];
  }
  auto at = [&](std::size_t i, std::size_t j) {
    const std::uint64_t* row = &rows[i * words];
    std::size_t count = 0, w = 0;
    for (; w < j / 64; ++w) count += static_cast<std::size_t>(std::popcount(row[w]));
    if (j % 64 != 0) count += static_cast<std::size_t>(std::popcount(row[w] & ((std::uint64_t{1} << (j % 64)) - 1)));
    return count;
  };
  std::size_t i = m, j = n;
  while (i > 0 && j > 0) {
    if (ops[i - 1] >= 0 && ops[i - 1] == tmpl[j - 1] && at(i, j) == at(i - 1, j - 1) + 1) {
      truth[i - 1] = static_cast<std::int64_t>(j - 1);
      --i, --j;
    } else if (at(i - 1, j) >= at(i, j - 1)) {
      --i;
    } else {
      --j;
    }
  }
}

}  // namespace

double plan_match_share(const ClockPlan& plan, const trace::Trace& trace, const trace::IterationAnalysis& an) {
  auto kind = [](bool kernel) { return kernel ? trace::OpKind::kernel : trace::OpKind::memcpy; };
  std::vector<std::pair<std::string, trace::OpKind>> planned, traced;
  for (const auto& p : plan.positions) planned.emplace_back(p.name, kind(p.kernel));
  std::set<std::int64_t> seen;  // a graph launch is one unit, as in the plan (runtime::clock_plan_from)
  for (const auto& op : an.tmpl.ops) {
    if (op.graph_launch >= 0) {
      if (seen.insert(op.graph_launch).second) traced.emplace_back(trace::graph_launch_name(op.graph_id), trace::OpKind::kernel);
      continue;
    }
    traced.emplace_back(trace.names[op.name_id], kind(op.kind == trace::OpKind::kernel));
  }
  return plan::position_match_share(planned, traced);
}

const char* to_string(SyncSource s) {
  switch (s) {
    case SyncSource::none: return "none";
    case SyncSource::trace: return "trace";
    case SyncSource::assumed_each_step: return "assumed_each_step";
  }
  return "none";
}

ReplayResult replay(const trace::Trace& trace, const ClockPlan& full_plan, const ReplayOptions& o, Actuator* actuator) {
  return replay(trace, trace::detect_iterations(trace), full_plan, o, actuator);
}

ReplayResult replay(const trace::Trace& trace, const trace::IterationAnalysis& an, const ClockPlan& full_plan,
                    const ReplayOptions& o, Actuator* actuator) {
  if (o.min_plan_match > 0) {
    const double share = plan_match_share(full_plan, trace, an);
    if (share < o.min_plan_match)
      throw PlanMismatchError(fmt::format(
          "the plan was made for another job: its {} positions and the trace's {}-op step share {:.0f} % in order "
          "(name and kind; at least {:.0f} % needed); make the plan from this job's trace",
          full_plan.size(), an.tmpl.ops.size(), 100 * share, 100 * o.min_plan_match));
  }
  // As live: the launch feed carries kernel launches only, so the template is the plan's kernels (all positions
  // when it has none) and copies and memsets are not launches.
  const ClockPlan plan = full_plan.kernels_only();
  const bool kernels_only = std::any_of(plan.positions.begin(), plan.positions.end(), [](const auto& p) { return p.kernel; });
  SchedulerOptions so = o.scheduler;
  if (o.sync_progress) so.anchor_on_completions = false;
  RuntimeCore core(plan, so, o.predictor);
  const PositionPredictor& pred = core.predictor();
  std::vector<std::string> names;
  for (const auto& p : plan.positions) names.push_back(p.name);
  std::vector<std::int32_t> tmpl;
  for (const auto& n : names) tmpl.push_back(pred.id_of(n));

  // The launch stream: the analysed device's ops in GPU start order.
  std::vector<ReplayOp> ops;
  std::vector<std::int32_t> name_ids;  // per trace name
  std::vector<model::KernelClass> name_cls;
  for (const auto& n : trace.names) {
    name_ids.push_back(pred.id_of(n));
    name_cls.push_back(pred.class_of(n));
  }
  std::unordered_map<std::int64_t, std::size_t> graph_op;  // correlation -> its launch's ReplayOp
  for (const auto& r : trace.ops) {
    if (r.device != an.device) continue;
    if (r.graph_id != 0) {
      // One launch on the CPU: one launch for the predictor, spanning its ops on the GPU.
      auto [it, fresh] = graph_op.try_emplace(r.correlation, ops.size());
      if (!fresh) {
        ops[it->second].end = std::max(ops[it->second].end, static_cast<double>(r.end_ns()));
        continue;
      }
      ReplayOp op;
      const std::string name = trace::graph_launch_name(r.graph_id);
      op.id = pred.id_of(name);
      op.cls = pred.class_of(name);
      op.start = static_cast<double>(r.start_ns);
      op.end = static_cast<double>(r.end_ns());
      op.launch = r.launch_ns >= 0 ? static_cast<double>(r.launch_ns) : op.start - o.cpu_lead_ns;
      ops.push_back(op);
      continue;
    }
    if (kernels_only && r.kind != trace::OpKind::kernel) continue;
    ReplayOp op;
    op.id = name_ids[r.name_id];
    op.cls = name_cls[r.name_id];
    op.kernel = r.kind == trace::OpKind::kernel;
    op.start = static_cast<double>(r.start_ns);
    op.end = static_cast<double>(r.end_ns());
    op.launch = r.launch_ns >= 0 ? static_cast<double>(r.launch_ns) : op.start - o.cpu_lead_ns;
    op.correlation = r.correlation;
    ops.push_back(op);
  }
  // Only the first max_steps steps: what follows the last one's end is left out.
  double replay_end = std::numeric_limits<double>::infinity();
  if (o.max_steps > 0 && o.max_steps < an.iterations.size()) {
    replay_end = static_cast<double>(an.iterations[o.max_steps - 1].end_ns);
    std::erase_if(ops, [&](const ReplayOp& op) { return op.start > replay_end; });
  }
  const std::size_t steps_replayed = o.max_steps > 0 ? std::min(o.max_steps, an.iterations.size()) : an.iterations.size();
  std::size_t k = 0;
  for (std::size_t s = 0; s < steps_replayed; ++s) {
    const auto& it = an.iterations[s];
    while (k < ops.size() && ops[k].start < static_cast<double>(it.start_ns)) ++k;
    std::size_t b = k;
    while (k < ops.size() && ops[k].start <= static_cast<double>(it.end_ns)) ++k;
    std::vector<std::int32_t> seq;
    for (std::size_t i = b; i < k; ++i) seq.push_back(ops[i].id);
    std::vector<std::int64_t> truth(seq.size(), -1);
    const StepAlignments::Entry* known = nullptr;
    if (o.alignments)
      for (const auto& e : o.alignments->entries)
        if (e.ops == seq && e.tmpl == tmpl) known = &e;
    if (known) {
      truth = known->truth;
    } else {
      align_step(seq, tmpl, truth);
      if (o.alignments) o.alignments->entries.push_back({seq, tmpl, truth});
    }
    for (std::size_t i = b; i < k; ++i) {
      ops[i].truth_pos = truth[i - b];
      if (truth[i - b] >= 0) ops[i].truth_step = static_cast<std::int64_t>(s);
    }
  }

  ReplayResult res;
  // Perturb the launch stream.
  std::mt19937_64 rng(o.perturb.seed);
  std::uniform_real_distribution<double> u(0, 1);
  std::uniform_int_distribution<std::size_t> any(0, tmpl.size() - 1);
  std::vector<ReplayOp> live;
  live.reserve(ops.size() + ops.size() / 16);
  for (const auto& op : ops) {
    if (o.perturb.drop > 0 && u(rng) < o.perturb.drop) {
      ++res.dropped_ops;
      continue;
    }
    live.push_back(op);
    if (o.perturb.insert > 0 && u(rng) < o.perturb.insert) {
      ReplayOp ins;
      const std::size_t p = any(rng);
      ins.id = tmpl[p];
      ins.cls = pred.class_of(names[p]);
      ins.launch = op.launch;
      ins.start = ins.end = op.end;  // a zero-length kernel: it takes no GPU time from the scored ones
      live.push_back(ins);
      ++res.inserted_ops;
    }
  }
  for (std::size_t i = 0; i + 1 < live.size(); ++i) {
    if (o.perturb.swap > 0 && u(rng) < o.perturb.swap) {
      // The two launches trade order; each keeps its identity, the GPU slots stay where they were.
      std::swap(live[i].id, live[i + 1].id);
      std::swap(live[i].cls, live[i + 1].cls);
      std::swap(live[i].truth_pos, live[i + 1].truth_pos);
      std::swap(live[i].truth_step, live[i + 1].truth_step);
      std::swap(live[i].kernel, live[i + 1].kernel);
      ++res.swapped_ops;
      ++i;
    }
  }
  for (std::size_t i = 1; i < live.size(); ++i) live[i].launch = std::max(live[i].launch, live[i - 1].launch);

  // Synchronizes: (returned, entered, index of the last launch before it), by return time. The runtime sees the
  // launches as correlations 2i + 2 and a synchronize after launch i as 2i + 3 (1: before every launch).
  struct Sync {
    double exit = 0, enter = 0;
    std::size_t last = SIZE_MAX;
  };
  std::vector<Sync> syncs;
  if (o.sync_progress && trace.syncs_recorded && !o.assume_sync_each_step) {
    res.sync_source = SyncSource::trace;
    // The last launch before each: by correlation (the call's ids share one counter) where both have one, else
    // by CPU time. Correlations rise with launch order on one thread; the running maximum keeps the search exact
    // for that and close for launches from several threads.
    std::vector<std::int64_t> max_corr(live.size());
    std::int64_t m = -1;
    for (std::size_t i = 0; i < live.size(); ++i) max_corr[i] = m = std::max(m, live[i].correlation);
    for (const auto& y : trace.syncs) {
      if (static_cast<double>(y.enter_ns) > replay_end) continue;  // after the steps replayed
      if (y.scope == trace::SyncRecord::Scope::event || (y.device >= 0 && y.device != an.device)) {
        ++res.syncs_ignored;  // live does not anchor on event synchronizes, nor on another device's
        continue;
      }
      Sync z;
      z.enter = static_cast<double>(y.enter_ns);
      z.exit = static_cast<double>(y.exit_ns());
      std::size_t after = 0;  // launches before it
      if (y.correlation >= 0 && m >= 0)
        after = static_cast<std::size_t>(std::lower_bound(max_corr.begin(), max_corr.end(), y.correlation) - max_corr.begin());
      else
        after = static_cast<std::size_t>(std::lower_bound(live.begin(), live.end(), z.enter,
                                                          [](const ReplayOp& op, double t) { return op.launch < t; }) -
                                         live.begin());
      z.last = after == 0 ? SIZE_MAX : after - 1;
      syncs.push_back(z);
    }
  } else if (o.sync_progress) {
    res.sync_source = SyncSource::assumed_each_step;
    for (std::size_t i = 0; i < live.size(); ++i) {
      if (live[i].truth_step < 0) continue;
      const auto st = static_cast<std::size_t>(live[i].truth_step);
      if (st >= syncs.size()) syncs.resize(st + 1);
      Sync& y = syncs[st];
      if (y.last == SIZE_MAX || live[i].launch >= live[y.last].launch) y.last = i;
      y.exit = std::max(y.exit, live[i].end);
    }
    std::erase_if(syncs, [](const Sync& y) { return y.last == SIZE_MAX; });
    for (Sync& y : syncs) {
      y.enter = live[y.last].launch + 10e3;
      y.exit = std::max(y.exit, y.enter + 1e3);  // the GPU already idle: it returns at once
    }
  }
  std::stable_sort(syncs.begin(), syncs.end(), [](const Sync& a, const Sync& b) { return a.exit < b.exit; });
  res.syncs_used = syncs.size();

  // Virtual-time event loop. Every event reaches the runtime as live's feed hands it over: at the writer's next
  // tick (feed_period_ns grid), launches and synchronizes in the order they were queued (launch entry,
  // synchronize return), then completed kernels, then the marker seen at that tick; the runtime polls once
  // after each batch, and at the scheduler's own wake-ups.
  const double P = o.feed_period_ns;
  auto tick = [P](double t) { return P > 0 ? std::ceil(t / P) * P : t; };
  std::vector<std::size_t> by_done(live.size());
  for (std::size_t i = 0; i < live.size(); ++i) by_done[i] = i;
  std::stable_sort(by_done.begin(), by_done.end(), [&](std::size_t a, std::size_t b) { return live[a].end < live[b].end; });
  std::vector<bool> launched(live.size(), false);
  std::uint64_t right = 0, strict = 0, next_right = 0;
  // Positions in one run of identical consecutive names cannot be told apart until the run ends.
  std::vector<std::size_t> run_of(tmpl.size());
  for (std::size_t p = 0; p < tmpl.size(); ++p) run_of[p] = p > 0 && tmpl[p] == tmpl[p - 1] ? run_of[p - 1] : p;
  const auto n = static_cast<std::int64_t>(tmpl.size());
  auto corr_of = [](std::size_t i) { return static_cast<std::int64_t>(2 * i + 2); };
  auto take = [&](std::int64_t now) {
    for (const auto& c : core.poll(now))
      if (actuator) actuator->apply(c, tmpl.size());
  };
  std::size_t il = 0, ic = 0, is = 0, im = 0;
  constexpr double kInf = std::numeric_limits<double>::infinity();
  // Stream markers, claimed by the injection library at a launch's entry (one outstanding; the next claim
  // marker_period_ns after the last was seen) and seen by the writer's poll after the kernel ended.
  struct Marker {
    std::size_t op;
    double not_before, seen;
  };
  std::vector<Marker> markers;
  double next_marker = 0;
  double batch = -kInf;  // the delivery time of the batch being handled (its poll is still due)
  for (;;) {
    // The next event: (delivery, order in the batch, queue time).
    struct Next {
      int what = -1;  // 0 launch, 1 sync, 2 completion, 3 marker
      double at = kInf, cls = 0, key = 0;
      bool before(const Next& b) const {
        return at != b.at ? at < b.at : cls != b.cls ? cls < b.cls : key < b.key;
      }
    } next;
    auto offer = [&](int what, double t, double cls) {
      Next c{what, tick(t), cls, t};
      if (c.before(next)) next = c;
    };
    if (il < live.size()) offer(0, live[il].launch, 0);
    if (is < syncs.size()) offer(1, syncs[is].exit, 0);
    if (ic < by_done.size()) offer(2, live[by_done[ic]].end + o.activity_delay_ns, 1);
    if (im < markers.size()) offer(3, markers[im].seen, 2);
    if (batch > -kInf && next.at > batch) {  // the batch is complete
      take(static_cast<std::int64_t>(batch));
      batch = -kInf;
    }
    if (next.what < 0) break;
    if (batch == -kInf) {  // between batches: the scheduler's own wake-ups first
      auto w = core.next_wakeup_ns();
      if (w && static_cast<double>(*w) < next.at) {
        take(*w);
        continue;
      }
    }
    batch = next.at;
    if (next.what == 3) {
      const Marker& mk = markers[im++];
      core.on_marker(corr_of(mk.op), static_cast<std::int64_t>(mk.not_before), static_cast<std::int64_t>(mk.seen));
    } else if (next.what == 1) {
      const Sync& y = syncs[is++];
      core.on_sync(y.last == SIZE_MAX ? 1 : corr_of(y.last) + 1, static_cast<std::int64_t>(y.enter),
                   static_cast<std::int64_t>(y.exit));
    } else if (next.what == 0) {
      ReplayOp& op = live[il];
      const double tl = op.launch;
      const std::int64_t expected = core.next_position();
      const Alignment a = core.on_launch(op.id, op.cls, corr_of(il), static_cast<std::int64_t>(tl));
      ++res.launches;
      if (op.truth_pos >= 0 && op.truth_step >= 1) {
        ++res.scored_launches;
        const bool locked_match = a.state == PredictorState::locked && a.matched;
        if (locked_match && a.position % n == op.truth_pos) ++strict;
        if (locked_match && run_of[static_cast<std::size_t>(a.position % n)] == run_of[static_cast<std::size_t>(op.truth_pos)]) ++right;
        else if (std::getenv("GEARSHIFT_REPLAY_DEBUG"))
          std::fprintf(stderr, "miss launch %zu truth %lld got %lld matched %d state %d id %d\n", il,
                       static_cast<long long>(op.truth_pos), static_cast<long long>(a.position % n), a.matched ? 1 : 0,
                       static_cast<int>(a.state), op.id);
        if (expected >= 0 && run_of[static_cast<std::size_t>(expected % n)] == run_of[static_cast<std::size_t>(op.truth_pos)]) ++next_right;
      }
      if (o.marker_period_ns > 0 && op.kernel && tl >= next_marker) {
        const double poll = std::max(o.marker_poll_ns, 1.0);
        const double seen = std::ceil(std::max(op.end, tl) / poll) * poll;
        markers.push_back({il, std::max(seen - poll, tl), seen});
        next_marker = seen + o.marker_period_ns;
      }
      launched[il] = true;
      ++il;
    } else {
      const std::size_t i = by_done[ic];
      if (!launched[i]) {  // cannot complete before its launch (a swapped pair): wait for it
        live[i].end = std::max(live[i].end, live[il].launch - o.activity_delay_ns);
        // The rest of by_done is sorted by end and only i's end grew: move i in front of the first op that ends
        // as late or later, where a stable sort of the rest puts it. Re-sorting the rest each time was quadratic
        // where many ops complete before their launch (a launch-bound MoE: 39 s of `run --auto`'s planning).
        const auto first = by_done.begin() + static_cast<std::ptrdiff_t>(ic);
        const auto to = std::lower_bound(first + 1, by_done.end(), live[i].end,
                                         [&](std::size_t a, double end) { return live[a].end < end; });
        std::rotate(first, first + 1, to);
        continue;
      }
      ++ic;
      const bool recorded = o.activity_period_ns <= 0 ||
                            std::fmod(live[i].start - live.front().start, o.activity_period_ns) < o.activity_window_ns;
      if (recorded)
        core.on_complete(corr_of(i), static_cast<std::int64_t>(live[i].start), static_cast<std::int64_t>(live[i].end));
    }
  }
  res.markers = markers.size();

  // In-time fraction: overlap of each scored kernel with the intervals where its intended clocks held.
  const auto& landings = core.landings();
  double total = 0, good = 0;
  for (const auto& op : live) {
    if (!op.kernel || op.truth_pos < 0 || op.truth_step < 1 || op.end <= op.start) continue;
    const model::ClockPair& want = plan.positions[static_cast<std::size_t>(op.truth_pos)].clocks;
    total += op.end - op.start;
    auto it = std::upper_bound(landings.begin(), landings.end(), op.start,
                               [](double t, const auto& seg) { return t < seg.first; });
    std::size_t s = static_cast<std::size_t>(it - landings.begin()) - 1;
    for (; s < landings.size() && landings[s].first < op.end; ++s) {
      const double a = std::max(op.start, landings[s].first);
      const double b = s + 1 < landings.size() ? std::min(op.end, landings[s + 1].first) : op.end;
      if (b > a && landings[s].second == want) good += b - a;
    }
  }
  const LiveStats st = core.stats();
  res.prediction_accuracy = res.scored_launches ? static_cast<double>(right) / static_cast<double>(res.scored_launches) : 0;
  res.strict_position_accuracy = res.scored_launches ? static_cast<double>(strict) / static_cast<double>(res.scored_launches) : 0;
  res.next_kernel_accuracy = res.scored_launches ? static_cast<double>(next_right) / static_cast<double>(res.scored_launches) : 0;
  res.in_time_fraction = total > 0 ? good / total : 0;
  res.live_prediction_accuracy = st.prediction_accuracy();
  res.changes = st.changes;
  res.dropped_changes = st.dropped;
  res.merged_changes = st.merged;
  res.late_changes = st.late;
  res.steps = st.steps;
  res.relocks = pred.relocks();
  res.losses = st.losses;
  res.boundary_error_ns = st.boundary_error_ns;
  return res;
}

}  // namespace gearshift::runtime
