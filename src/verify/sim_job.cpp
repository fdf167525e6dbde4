#include "verify/sim_job.hpp"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <cstdio>
#include <cstdlib>
#include <stdexcept>

#include "verify/step_cycle.hpp"

namespace gearshift::verify {

SimJob::SimJob(std::vector<TruthPosition> positions, model::ClockPair baseline, SimJobOptions o)
    : pos_(std::move(positions)), base_(baseline), o_(o) {
  for (const auto& p : pos_)
    if (!p.sweep.empty() && p.sweep.size() < 2) throw std::invalid_argument("SimJob: a sweep needs two clocks");
}

namespace {

// Linear interpolation of y(f) over samples ascending in f; the end values beyond them.
template <class Y>
double interp(const std::vector<model::Sample>& s, int f, Y y) {
  if (f <= s.front().sm_mhz) return y(s.front());
  if (f >= s.back().sm_mhz) return y(s.back());
  auto it = std::lower_bound(s.begin(), s.end(), f, [](const model::Sample& a, int v) { return a.sm_mhz < v; });
  const auto& hi = *it;
  const auto& lo = *(it - 1);
  const double w = static_cast<double>(f - lo.sm_mhz) / (hi.sm_mhz - lo.sm_mhz);
  return y(lo) + w * (y(hi) - y(lo));
}

double sweep_time(const std::vector<model::Sample>& s, int f) {
  return interp(s, f, [](const model::Sample& x) { return x.time_s; });
}
double sweep_power(const std::vector<model::Sample>& s, int f) {
  return interp(s, f, [](const model::Sample& x) { return x.energy_j / x.time_s; });
}

}  // namespace

double SimJob::pos_time(std::size_t i, int sm) const {
  const TruthPosition& p = pos_[i];
  if (!p.sweep.empty()) return p.base_ns * sweep_time(p.sweep, sm) / sweep_time(p.sweep, base_.sm_mhz);
  return p.base_ns * (p.a * base_.sm_mhz / sm + 1 - p.a);
}

double SimJob::pos_power(std::size_t i, int sm) const {
  const TruthPosition& p = pos_[i];
  if (!p.sweep.empty()) return p.base_w * sweep_power(p.sweep, sm) / sweep_power(p.sweep, base_.sm_mhz);
  return o_.idle_w + (p.base_w - o_.idle_w) * std::pow(static_cast<double>(sm) / base_.sm_mhz, p.gamma);
}

double SimJob::step_s(const std::vector<model::ClockPair>& c) const {
  double ns = o_.gap_ns;
  for (std::size_t i = 0; i < pos_.size(); ++i) ns += pos_time(i, c[i].sm_mhz);
  return ns / 1e9;
}

double SimJob::step_j(const std::vector<model::ClockPair>& c) const {
  double j = o_.idle_w * o_.gap_ns / 1e9;
  for (std::size_t i = 0; i < pos_.size(); ++i) j += pos_power(i, c[i].sm_mhz) * pos_time(i, c[i].sm_mhz) / 1e9;
  return j;
}

ClosedLoopResult run_closed_loop(const SimJob& job, const Ladder& ladder, const ControllerOptions& o,
                                 std::uint64_t steps, std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<double> noise(0, 1);
  std::uniform_real_distribution<double> jitter(-1, 1);
  Controller c(o, ladder);
  ClosedLoopResult res;
  const std::vector<model::ClockPair> base = ladder.clocks_at(0);
  const double base_step_s = job.step_s(base), base_step_j = job.step_j(base);
  const double total_s = base_step_s * static_cast<double>(steps);
  double t = 0;  // wall time, s
  std::uint64_t done = 0;
  StepCycle cycle(o.max_cycle);
  while (done < steps) {
    const BlockPlan b = c.next();
    const std::vector<model::ClockPair> clocks = ladder.clocks_at(b.arm == Arm::plan ? b.alpha : 0);
    const double ts = job.step_s(clocks), tj = job.step_j(clocks);
    BlockResult r;
    double measured_from = -1, block_s = 0;
    std::vector<double> step_end;
    std::uint64_t in_block = 0;
    // An unmeasured block runs as long as a measured one would.
    while (done < steps) {
      const double drift = 1 + job.options().drift * t / total_s;
      double s = std::max(0.1 * ts, ts * drift * (1 + job.options().step_cv * noise(rng)));
      double slow = 1;  // this step's share of a normal one (the job's cycle of slow steps)
      if (job.options().slow_every > 0 && done % job.options().slow_every == job.options().slow_every - 1)
        slow = 1 + job.options().slow_extra, s *= slow;
      cycle.add(s, c.blocks());
      res.run_energy_j += tj * slow;
      res.baseline_energy_j += base_step_j * slow;
      ++done;
      ++in_block;
      if (in_block > o.settle_steps) {
        if (measured_from < 0) measured_from = t;
        r.step_s.push_back(s);
        block_s += s;
      }
      t += s;
      if (r.step_s.size() >= o.block_steps && block_s >= o.block_seconds && cycle.whole(r.step_s.size())) break;
    }
    if (done >= steps && (r.step_s.size() < o.block_steps || block_s < o.block_seconds || !cycle.whole(r.step_s.size())))
      break;  // ended mid-block
    // The counter's window: the first and last tick inside the measured steps, each located within the jitter.
    const double period = job.options().counter_period_s;
    const double first_tick = std::ceil(measured_from / period) * period, last_tick = std::floor(t / period) * period;
    if (last_tick - first_tick >= period) {
      const double e0 = first_tick + job.options().tick_jitter_s * jitter(rng);
      const double e1 = last_tick + job.options().tick_jitter_s * jitter(rng);
      // Power follows the step: mean power of the block's steps (their energy at the truth over their noisy time).
      const double watts = tj / ts;
      r.energy_seconds = e1 - e0;
      r.joules = watts * (last_tick - first_tick);
    }
    for (const auto& ev : c.finish_block(r)) {
      if (std::getenv("VERIFY_DEBUG_EVENTS")) std::printf("    [%llu] %s: %s\n", static_cast<unsigned long long>(seed), ev.kind.c_str(), ev.why.c_str());
      // The first verdict: the first rung that holds, or the baseline (a climb after a hold comes later).
      if (res.steps_to_verdict == 0 && (ev.kind == "hold" || c.phase() == Phase::baseline)) res.steps_to_verdict = done;
    }
  }
  res.steps = done;
  res.cycle = cycle.period();
  res.phase = c.phase();
  res.alpha = c.phase() == Phase::baseline ? 0 : c.alpha();
  const auto end_clocks = ladder.clocks_at(res.alpha);
  res.truth_slowdown = job.step_s(end_clocks) / base_step_s - 1;
  res.truth_saving = 1 - job.step_j(end_clocks) / base_step_j;
  if (c.phase() != Phase::baseline) res.reported = c.current();
  res.events = c.events().size();
  return res;
}

std::vector<model::ClockPair> plan_by_model(const std::vector<double>& base_ns, const std::vector<double>& model_a,
                                            model::ClockPair baseline, const std::vector<int>& sm_clocks_mhz,
                                            double gap_ns, double budget) {
  std::vector<model::ClockPair> out(base_ns.size(), baseline);
  const double step = std::accumulate(base_ns.begin(), base_ns.end(), gap_ns);
  double left = budget * step;
  std::vector<std::size_t> order(base_ns.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](auto x, auto y) { return model_a[x] < model_a[y]; });
  for (std::size_t i : order) {
    for (int f : sm_clocks_mhz) {  // ascending: the lowest that fits
      if (f >= baseline.sm_mhz) break;
      const double added = base_ns[i] * model_a[i] * (static_cast<double>(baseline.sm_mhz) / f - 1);
      if (added <= left) {
        out[i].sm_mhz = f;
        left -= added;
        break;
      }
    }
  }
  return out;
}

LawJob make_law_job(const LawJobOptions& o) {
  std::mt19937_64 rng(7);
  std::uniform_real_distribution<double> dur(1e6, 8e6), a(0.1, 0.9), w(250, 650);
  std::vector<TruthPosition> pos;
  std::vector<double> base_ns, model_a;
  for (int i = 0; i < 24; ++i) {
    TruthPosition p;
    p.base_ns = dur(rng);
    const double am = a(rng);
    p.a = std::min(1.0, o.a_scale * am);
    p.gamma = o.gamma;
    p.base_w = w(rng);
    pos.push_back(p);
    base_ns.push_back(p.base_ns);
    model_a.push_back(am);
  }
  const model::ClockPair base{1980, 2619};
  SimJobOptions so;
  so.gap_ns = 0.1 * std::accumulate(base_ns.begin(), base_ns.end(), 0.0);
  so.step_cv = o.step_cv;
  so.slow_every = o.slow_every;
  so.slow_extra = o.slow_extra;
  Ladder l;
  l.duration_ns = base_ns;
  l.baseline = base;
  for (int f = 345; f <= 1980; f += 15) l.sm_clocks_mhz.push_back(f);
  l.plan = plan_by_model(base_ns, model_a, base, l.sm_clocks_mhz, so.gap_ns, o.plan_budget);
  return {SimJob(pos, base, so), l};
}

}  // namespace gearshift::verify
