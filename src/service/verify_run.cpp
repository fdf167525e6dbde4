#include "service/verify_run.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <stdexcept>

#include <fmt/core.h>
#include <nlohmann/json.hpp>

#include "gpu/spec.hpp"
#include "runtime/live.hpp"
#include "runtime/session.hpp"

namespace gearshift::service {

namespace {

// A block lasts at least this many counter periods, so that its two edge ticks' timing error (a few ms each) is
// under 1 % of the window (20 x 100 ms on an H200).
constexpr std::int64_t kBlockCounterPeriods = 20;

verify::Ladder ladder_of(const runtime::ClockPlan& plan, std::vector<int> sm, std::vector<int> mem) {
  verify::Ladder l;
  for (const auto& p : plan.positions) {
    l.duration_ns.push_back(p.duration_ns);
    l.plan.push_back(p.clocks);
  }
  l.baseline = plan.default_clocks;
  l.sm_clocks_mhz = std::move(sm);
  l.mem_clocks_mhz = std::move(mem);
  return l;
}

verify::ControllerOptions controller_options(const VerifyOptions& o, std::int64_t period_ns, bool apply) {
  verify::ControllerOptions c;
  c.decide = apply;  // a dry run measures the noise floor only
  c.budget = o.budget;
  c.block_steps = std::max<std::uint64_t>(1, o.block_steps);
  c.block_seconds = o.block_seconds > 0
                        ? o.block_seconds
                        : static_cast<double>(kBlockCounterPeriods * std::max<std::int64_t>(period_ns, 1)) * 1e-9;
  return c;
}

nlohmann::json interval_json(const verify::Interval& i) { return {{"estimate", i.estimate}, {"lo", i.lo}, {"hi", i.hi}}; }

nlohmann::json estimate_json(const verify::AbEstimate& e) {
  nlohmann::json j = {{"quads", e.quads}, {"steps", e.steps}, {"confidence", e.confidence},
                      {"slowdown", interval_json(e.slowdown)}, {"sd_log_time", e.sd_log_time},
                      {"sd_floor", e.sd_floor}};
  j["saving"] = e.saving ? interval_json(*e.saving) : nlohmann::json();
  return j;
}

std::string pct(double f) { return fmt::format("{:+.2f} %", 100 * f); }

}  // namespace

ClocksRead clocks_read(const monitor::RunEnergy& energy) {
  return [&energy]() -> std::optional<verify::ClockSample> {
    const auto k = energy.clocks();
    if (!k) return std::nullopt;
    return verify::ClockSample{k->sm_mhz, k->reasons};
  };
}

LiveVerifier::LiveVerifier(const VerifyOptions& o, const runtime::ClockPlan& plan, std::vector<int> sm_clocks,
                           std::vector<int> mem_clocks, std::int64_t counter_period_ns, bool apply, CounterRead counter,
                           ClocksRead clocks)
    : o_(o),
      ctl_(controller_options(o, counter_period_ns, apply), ladder_of(plan, std::move(sm_clocks), std::move(mem_clocks))),
      apply_(apply),
      counter_(std::move(counter)),
      clocks_(std::move(clocks)),
      period_ns_(counter_period_ns) {
  if (!o_.log_path.empty()) {
    log_.open(o_.log_path, std::ios::trunc);
    if (!log_) throw std::runtime_error("--verify-log " + o_.log_path + ": cannot open it for writing");
  }
  settle_left_ = ctl_.options().settle_steps;
  cycle_ = verify::StepCycle(ctl_.options().max_cycle);
  update_gauges();
  if (counter_) thread_ = std::thread([this] { counter_loop(); });
}

LiveVerifier::~LiveVerifier() { stop(); }

void LiveVerifier::halt(const std::string& why) {
  if (!stopped_why_.empty()) return;
  stopped_why_ = why;
  partial_steps_ = step_s_.size();
  step_s_.clear();
  update_gauges();
}

void LiveVerifier::stop() {
  stopping_ = true;
  if (thread_.joinable()) thread_.join();
  if (!step_s_.empty() && partial_steps_ == 0) partial_steps_ = step_s_.size();
}

// Reads the counter at each tick, sleeping most of a period between: a few reads per tick (≈4 ms each on an H200).
void LiveVerifier::counter_loop() {
  while (!stopping_) {
    std::optional<monitor::CounterAtTick> c;
    try {
      c = counter_();
    } catch (...) {
      c.reset();
    }
    if (!c) {
      std::lock_guard<std::mutex> g(mu_);
      counter_error_ = "the energy counter could not be read";
      return;
    }
    if (c->located) {
      std::optional<verify::ClockSample> k;
      if (clocks_) {
        try {
          k = clocks_();
        } catch (...) {
          k.reset();
        }
      }
      std::lock_guard<std::mutex> g(mu_);
      ticks_.emplace_back(c->t_ns, c->j);
      // Keep what a block may reach back to (an hour of ticks at most).
      if (ticks_.size() > 40'000) ticks_.erase(ticks_.begin(), ticks_.begin() + 20'000);
      if (k) {
        clock_reads_.emplace_back(c->t_ns, *k);
        if (clock_reads_.size() > 40'000) clock_reads_.erase(clock_reads_.begin(), clock_reads_.begin() + 20'000);
      }
    }
    const auto sleep = std::chrono::nanoseconds(std::max<std::int64_t>(0, period_ns_ - 20'000'000));
    for (auto t = std::chrono::steady_clock::now() + sleep; !stopping_ && std::chrono::steady_clock::now() < t;)
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
}

verify::BlockResult LiveVerifier::close_block(std::int64_t end_ns) {
  verify::BlockResult r;
  r.step_s = step_s_;
  std::lock_guard<std::mutex> g(mu_);
  // The first and the last tick inside the measured steps.
  auto first = std::lower_bound(ticks_.begin(), ticks_.end(), std::make_pair(measured_from_ns_, -1e300));
  auto last = std::upper_bound(ticks_.begin(), ticks_.end(), std::make_pair(end_ns, 1e300));
  if (first != ticks_.end() && last != ticks_.begin()) {
    --last;
    if (last > first && last->second > first->second) {
      r.joules = last->second - first->second;
      r.energy_seconds = static_cast<double>(last->first - first->first) * 1e-9;
    }
  }
  return r;
}

std::vector<verify::ClockSample> LiveVerifier::block_clocks(std::int64_t end_ns) const {
  std::vector<verify::ClockSample> out;
  std::lock_guard<std::mutex> g(mu_);
  for (const auto& [t, k] : clock_reads_)
    if (t >= measured_from_ns_ && t <= end_ns) out.push_back(k);
  return out;
}

verify::BlockHold LiveVerifier::hold_of(verify::Arm arm, double alpha) const {
  verify::BlockHold h;
  const model::ClockPair base = ctl_.ladder().baseline;
  const auto clocks = ctl_.ladder().clocks_at(arm == verify::Arm::plan ? alpha : 0);
  const bool any = std::any_of(clocks.begin(), clocks.end(), [&](const model::ClockPair& c) { return !(c == base); });
  h.none = !apply_ || !any;
  // The SM clock locked at every position (below the default: the runtime resets a default position's lock).
  if (apply_ && !clocks.empty() &&
      std::all_of(clocks.begin(), clocks.end(), [&](const model::ClockPair& c) { return c.sm_mhz < base.sm_mhz; })) {
    int top = 0;
    for (const auto& c : clocks) top = std::max(top, c.sm_mhz);
    h.sm_ceiling_mhz = static_cast<unsigned>(top);
  }
  return h;
}

void LiveVerifier::log(const std::string& line) {
  if (log_) log_ << line << '\n' << std::flush;
}

void LiveVerifier::set_arm(runtime::LiveRuntime& rt, std::int64_t now) {
  const verify::BlockPlan b = ctl_.next();
  const double alpha = b.arm == verify::Arm::plan ? b.alpha : 0;
  if (apply_) rt.set_position_clocks(ctl_.ladder().clocks_at(alpha));
  if (arm_points_.size() < 1'000'000 && (arm_points_.empty() || arm_points_.back().second != alpha))
    arm_points_.emplace_back(now, alpha);
  arm_set_ = true;
}

void LiveVerifier::on_live_event(std::int64_t now, std::uint64_t steps, runtime::LiveRuntime& rt, bool fell_back) {
  if (!stopped_why_.empty()) return;
  if (fell_back) {
    stopped_why_ = "the in-time guard replaced the plan by one clock pair: verification stopped there (its figures "
                   "above are of the phase plan)";
    return;
  }
  if (!arm_set_) set_arm(rt, now);
  if (last_steps_ && steps == *last_steps_) return;
  const bool first = !last_steps_;
  last_steps_ = steps;
  const std::int64_t prev = last_boundary_ns_;
  last_boundary_ns_ = now;
  if (first) return;  // the first boundary seen: steps are measured from here
  if (cycle_.period() == 0) {
    cycle_.add(static_cast<double>(now - prev) * 1e-9, ctl_.blocks());
    if (cycle_.period() > 0) {
      log(nlohmann::json({{"event", "cycle"}, {"block", ctl_.blocks()}, {"steps", cycle_.period()},
                          {"why", cycle_.why()}})
              .dump());
      lines_.push_back(fmt::format("block {}: cycle: {}", ctl_.blocks(), cycle_.why()));
    }
  }
  if (settle_left_ > 0) {
    if (--settle_left_ == 0) measured_from_ns_ = now;
    return;
  }
  step_s_.push_back(static_cast<double>(now - prev) * 1e-9);
  const double block_s = static_cast<double>(now - measured_from_ns_) * 1e-9;
  const verify::ControllerOptions& co = ctl_.options();
  if (step_s_.size() < co.block_steps || block_s < co.block_seconds || !cycle_.whole(step_s_.size())) return;
  const verify::BlockPlan b = ctl_.next();
  const verify::BlockResult r = close_block(now);
  const std::size_t block = ctl_.blocks();
  const std::vector<verify::ClockSample> reads = block_clocks(now);
  double sum = 0;
  for (double s : r.step_s) sum += s;
  nlohmann::json line = {{"event", "block"}, {"block", block}, {"arm", verify::arm_name(b.arm)}, {"alpha", b.alpha},
                         {"measured", b.measured}, {"applied", apply_}, {"steps", r.step_s.size()},
                         {"mean_step_s", sum / static_cast<double>(r.step_s.size())}, {"joules", r.joules},
                         {"energy_seconds", r.energy_seconds}};
  if (!reads.empty()) {  // what NVML said of the clocks inside the block: whose clocks the block ran
    unsigned lo = reads.front().sm_mhz, hi = lo;
    std::uint64_t any = 0;
    for (const auto& k : reads) lo = std::min(lo, k.sm_mhz), hi = std::max(hi, k.sm_mhz), any |= k.reasons;
    line["clock_reads"] = {{"n", reads.size()}, {"sm_mhz_min", lo}, {"sm_mhz_max", hi}, {"reasons_any", any}};
  }
  log(line.dump());
  if (const auto why = watch_.check(reads, hold_of(b.arm, b.alpha))) {
    // The block ran clocks gearshift did not set: it and every later one would judge the other setter, not the
    // plan. With apply, gearshift stops competing for the clocks: the default clocks from here (restored at exit).
    log(nlohmann::json({{"event", "foreign_clocks"}, {"block", block}, {"why", *why}}).dump());
    lines_.push_back(fmt::format("block {}: foreign_clocks: {}", block, *why));
    halt(apply_ ? "verification stopped there and the plan was set aside for the default clocks (no verdict from "
                  "that block on; its figures are of the quads before)"
                : "verification stopped there (no figure from that block on; those above are of the quads before)");
    foreign_ = true;
    if (apply_) rt.set_position_clocks(ctl_.ladder().clocks_at(0));
    update_gauges();
    return;
  }
  const auto events = ctl_.finish_block(r);
  for (const auto& ev : events) {
    log(nlohmann::json({{"event", ev.kind}, {"block", ev.block}, {"alpha_from", ev.alpha_from},
                        {"alpha_to", ev.alpha_to}, {"why", ev.why}, {"estimate", estimate_json(ev.estimate)}})
            .dump());
    if (ev.kind != "no_tick") lines_.push_back(fmt::format("block {}: {}: {}", ev.block, ev.kind, ev.why));
  }
  step_s_.clear();
  settle_left_ = co.settle_steps;
  measured_from_ns_ = -1;
  if (settle_left_ == 0) measured_from_ns_ = now;
  set_arm(rt, now);
  update_gauges();
}

void LiveVerifier::poll(runtime::Session& session, std::int64_t now) {
  runtime::LiveRuntime* rt = session.live();
  if (rt == nullptr) return;
  const std::uint64_t steps = rt->steps();
  // Between step ends nothing changes: no lock taken (the feed reader calls this after every event).
  if (arm_set_ && last_steps_ && steps == *last_steps_) return;
  if (session.options().apply && (!session.writes_clocks() || session.failed_changes() > 0))
    halt("NVML stopped taking clock changes (a GPU lost, or a change refused): verification stopped there; its "
         "figures are of the quads before");
  on_live_event(now, steps, *rt, rt->fell_back());
}

void LiveVerifier::update_gauges() {
  const verify::AbEstimate e = ctl_.reported();
  std::string t;
  auto gauge = [&](const char* name, const char* help, const std::vector<std::pair<std::string, double>>& values) {
    t += fmt::format("# HELP {} {}\n# TYPE {} gauge\n", name, help, name);
    for (const auto& [labels, v] : values)
      t += labels.empty() ? fmt::format("{} {}\n", name, v) : fmt::format("{}{{{}}} {}\n", name, labels, v);
  };
  gauge("gearshift_verify_applied", "1: plan and baseline blocks ran their clocks (--apply); 0: a dry run's noise floor",
        {{"", apply_ ? 1 : 0}});
  gauge("gearshift_verify_blocks", "Verification blocks finished", {{"", static_cast<double>(ctl_.blocks())}});
  gauge("gearshift_verify_quads", "ABBA quads the reported figures rest on", {{"", static_cast<double>(e.quads)}});
  gauge("gearshift_verify_steps", "Steps the reported figures rest on", {{"", static_cast<double>(e.steps)}});
  if (e.quads >= 2) {
    gauge("gearshift_verify_slowdown_ratio",
          "Step-time slowdown of the plan against the baseline, MEASURED (fraction), with its t interval",
          {{"bound=\"estimate\"", e.slowdown.estimate}, {"bound=\"lo\"", e.slowdown.lo}, {"bound=\"hi\"", e.slowdown.hi}});
    if (e.saving)
      gauge("gearshift_verify_energy_saving_ratio",
            "Energy-per-step saving of the plan against the baseline, MEASURED by the energy counter (fraction)",
            {{"bound=\"estimate\"", e.saving->estimate}, {"bound=\"lo\"", e.saving->lo}, {"bound=\"hi\"", e.saving->hi}});
  }
  gauge("gearshift_verify_budget_ratio", "The step-time budget verified against (fraction)", {{"", ctl_.options().budget}});
  gauge("gearshift_verify_plan_share", "Share of the plan's clock reduction in force (1 the plan, 0 the baseline)",
        {{"", (foreign_ && apply_) || ctl_.phase() == verify::Phase::baseline ? 0.0 : ctl_.alpha()}});
  std::vector<std::pair<std::string, double>> phases;
  for (verify::Phase p : {verify::Phase::verifying, verify::Phase::held, verify::Phase::baseline})
    phases.emplace_back(fmt::format("phase=\"{}\"", verify::phase_name(p)), ctl_.phase() == p ? 1 : 0);
  gauge("gearshift_verify_phase", "The closed loop's phase (1 for the current one)", phases);
  gauge("gearshift_verify_stopped", "1: verification stopped early (GPU lost, clocks changed by someone else, ...)",
        {{"", stopped_why_.empty() ? 0 : 1}});
  std::lock_guard<std::mutex> g(mu_);
  gauges_ = std::move(t);
}

std::string LiveVerifier::prometheus_text() const {
  std::lock_guard<std::mutex> g(mu_);
  return gauges_;
}

// In a dry run the blocks only measure the noise floor: that never keeps a one-pair plan's feed on (the feed costs a
// launch-bound job; issue 50), and the blocks end where the feed does.
bool LiveVerifier::needs_steps() const {
  return apply_ && stopped_why_.empty() && ctl_.phase() == verify::Phase::verifying;
}

std::string LiveVerifier::summary() const {
  const verify::AbEstimate e = ctl_.reported();
  std::string out = fmt::format("  measured verification ({}; budget {:.2f} %, blocks of >= {} steps and >= {:.1f} s, "
                                "ABBA quads, {:.0f} % t intervals): {}\n",
                                apply_ ? "applied: plan and baseline blocks alternate on the GPU"
                                       : "dry-run: the arms are intended, both ran the same clocks, so this is the "
                                         "job's noise floor and no verdict is made",
                                100 * ctl_.options().budget, ctl_.options().block_steps, ctl_.options().block_seconds,
                                100 * ctl_.options().confidence,
                                apply_ ? verify::phase_name(ctl_.phase()) : "noise floor");
  const char* what = apply_ ? "step time" : "step time, arm against arm";
  if (e.quads == 0) {
    out += fmt::format("    no quad completed ({} block(s) of 4 in {} steps): too few steps to measure anything\n",
                       ctl_.blocks(), ctl_.plan_steps() + ctl_.baseline_steps());
  } else if (e.quads < 2) {
    out += fmt::format("    {} {} over 1 quad ({} steps), MEASURED: no interval before 2 quads\n", what,
                       pct(e.slowdown.estimate), e.steps);
  } else {
    out += fmt::format("    {} {} [{}, {}] over {} quads ({} steps){}, MEASURED\n", what, pct(e.slowdown.estimate),
                       pct(e.slowdown.lo), pct(e.slowdown.hi), e.quads, e.steps,
                       ctl_.phase() == verify::Phase::baseline ? " (the rung left for the baseline)" : "");
    out += e.saving ? fmt::format("    energy per step saving {} [{}, {}], MEASURED (energy counter)\n",
                                  pct(e.saving->estimate), pct(e.saving->lo), pct(e.saving->hi))
                    : std::string("    energy per step: not measured (no two counter ticks inside the blocks)\n");
    const double sd = std::max(e.sd_log_time, e.sd_floor);
    const std::uint64_t per_quad = e.steps / e.quads;
    for (double res : {0.005, 0.01, 0.02}) {
      const std::size_t q = verify::quads_to_resolve(sd, res, e.confidence);
      out += fmt::format("    resolving {:.1f} % of step time needs about {} quads ({} steps) at this job's scatter "
                         "({:.2f} % per quad)\n",
                         100 * res, q, q * per_quad, 100 * sd);
    }
  }
  for (const auto& l : lines_) out += "    " + l + "\n";
  if (ctl_.phase() != verify::Phase::baseline && ctl_.alpha() < 1 && !(foreign_ && apply_))
    out += fmt::format("    ended on {:.0f} % of the plan's clock reduction (backed off)\n", 100 * ctl_.alpha());
  // (No line may start "  steps ": the run's own figures line does, and readers find it so.)
  out += fmt::format("    {}: {} of {}\n",
                     apply_ ? "baseline-clock steps run for verification"
                            : "blocks labelled baseline (intended: no clock was changed), their steps",
                     ctl_.baseline_steps(), ctl_.baseline_steps() + ctl_.plan_steps());
  // What verifying cost in energy: the baseline blocks' steps did not save what the plan saves per step.
  if (apply_ && e.saving && e.saving->estimate > 0 && ctl_.baseline_steps() > 0) {
    double base_j = 0;
    std::uint64_t base_steps = 0;
    for (const auto& r : ctl_.rungs())
      for (const auto& q : r.quads)
        if (q.base.energy_seconds > 0) base_j += q.base.watts() * q.base.seconds, base_steps += q.base.steps;
    if (base_steps > 0) {
      const double per_step_j = base_j / static_cast<double>(base_steps);
      out += fmt::format("    verification's cost: about {:.0f} J not saved ({} baseline steps x {:.1f} J x the {:.2f} % "
                         "measured saving)\n",
                         static_cast<double>(ctl_.baseline_steps()) * per_step_j * e.saving->estimate,
                         ctl_.baseline_steps(), per_step_j, 100 * e.saving->estimate);
    }
  }
  if (partial_steps_ > 0) out += fmt::format("    the job ended inside a block: its {} step(s) are left out\n", partial_steps_);
  if (!stopped_why_.empty()) out += "    " + stopped_why_ + "\n";
  {
    std::lock_guard<std::mutex> g(mu_);
    if (!counter_error_.empty()) out += "    " + counter_error_ + ": energy not measured\n";
  }
  return out;
}

std::unique_ptr<LiveVerifier> make_live_verifier(const VerifyOptions& o, const runtime::ClockPlan& plan, bool apply,
                                                 CounterRead counter, const std::function<void(std::string_view)>& sink,
                                                 ClocksRead clocks) {
  if (!o.enabled) return nullptr;
  auto say_line = [&](const std::string& l) {
    if (sink) sink(l);
  };
  std::vector<int> sm, mem;
  std::int64_t period = 100'000'000;
  try {
    const gpu::GpuSpec spec = gpu::find_spec(plan.gpu);
    sm = spec.sm_clocks_mhz;
    mem = spec.mem_clocks_mhz;
    if (spec.energy_counter_update_ns > 0) period = spec.energy_counter_update_ns;
  } catch (const std::invalid_argument&) {
    say_line(fmt::format("gearshift: note: no spec for '{}': measured verification's rungs are not snapped to "
                         "supported clocks, and its blocks assume a 100 ms energy counter",
                         plan.gpu));
  }
  try {
    return std::make_unique<LiveVerifier>(o, plan.kernels_only(), std::move(sm), std::move(mem), period, apply,
                                          std::move(counter), std::move(clocks));
  } catch (const std::exception& e) {
    say_line(fmt::format("gearshift: warning: measured verification is off: {}", e.what()));
    return nullptr;
  }
}

}  // namespace gearshift::service
