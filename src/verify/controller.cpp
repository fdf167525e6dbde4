#include "verify/controller.hpp"

#include <algorithm>
#include <cmath>
#include <stdexcept>

#include <fmt/core.h>

namespace gearshift::verify {

const char* arm_name(Arm a) { return a == Arm::plan ? "plan" : "baseline"; }

const char* phase_name(Phase p) {
  switch (p) {
    case Phase::verifying: return "verifying";
    case Phase::held: return "held";
    case Phase::baseline: return "baseline";
  }
  return "?";
}

namespace {

// The arm of block `pos` (0-3) of quad number `q`: ABBA for even quads, BAAB for odd ones, so that neither arm
// always goes first (the first block after a switch may carry the other arm's tail).
Arm quad_arm(std::size_t q, std::size_t pos) {
  const bool plan_first = q % 2 == 0;
  const bool outer = pos == 0 || pos == 3;
  return outer == plan_first ? Arm::plan : Arm::baseline;
}

double median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::nth_element(v.begin(), v.begin() + static_cast<long>(v.size() / 2), v.end());
  return v[v.size() / 2];
}

std::string pct(double f) { return fmt::format("{:+.2f} %", 100 * f); }

std::string interval_text(const Interval& i) {
  return fmt::format("{} [{}, {}]", pct(i.estimate), pct(i.lo), pct(i.hi));
}

}  // namespace

Controller::Controller(ControllerOptions o, Ladder ladder) : o_(o), ladder_(std::move(ladder)) {
  if (!(o_.budget >= 0) || !(o_.confidence > 0 && o_.confidence < 1) || o_.min_quads < 2 ||
      o_.max_quads < o_.min_quads || o_.max_rungs < 1 || !(o_.margin > 0 && o_.margin <= 1) || o_.block_steps < 1)
    throw std::invalid_argument("verify::Controller: options out of range (budget >= 0, 0 < confidence < 1, "
                                "2 <= min_quads <= max_quads, max_rungs >= 1, 0 < margin <= 1, block_steps >= 1)");
  shape_from_clocks_ = ladder_.shape(1) > 0;
  rungs_.push_back(Rung{1, {}, ""});
}

double Controller::shape(double alpha) const { return shape_from_clocks_ ? ladder_.shape(alpha) : alpha; }

BlockPlan Controller::next() const {
  if (phase_ == Phase::baseline) return {Arm::baseline, 0, false};
  if (phase_ == Phase::held && steady_left_ > 0) return {Arm::plan, alpha(), false};
  return {quad_arm(rungs_[cur_].quads.size(), quad_pos_), alpha(), true};
}

AbEstimate Controller::current() const { return rung_estimate(rungs_[cur_]); }

AbEstimate Controller::rung_estimate(const Rung& r) const {
  if (r.held_at > 0 && r.quads.size() >= r.held_at + o_.min_quads)
    return estimate(std::vector<Quad>(r.quads.begin() + static_cast<long>(r.held_at), r.quads.end()), o_.confidence);
  return estimate(r.quads, o_.confidence);
}

std::vector<VerifyEvent> Controller::finish_block(const BlockResult& r) {
  std::vector<VerifyEvent> out;
  const BlockPlan b = next();
  ++blocks_;
  const auto steps = static_cast<std::uint64_t>(r.step_s.size());
  (b.arm == Arm::baseline ? baseline_steps_ : plan_steps_) += steps + o_.settle_steps;
  if (!b.measured) {
    if (phase_ == Phase::held && steady_left_ > 0) --steady_left_;
    return out;
  }
  // A stall (a checkpoint save, an evaluation inside the steps' count) says nothing about the clocks: the block
  // is run again, as the same arm of the same quad.
  const double med = median(r.step_s);
  const double worst = r.step_s.empty() ? 0 : *std::max_element(r.step_s.begin(), r.step_s.end());
  if (r.step_s.empty() || !(med > 0) || worst > o_.stall_factor * med) {
    VerifyEvent ev{blocks_, "stall", alpha(), alpha(), current(),
                   r.step_s.empty() ? std::string("a block with no measured step: run again")
                                    : fmt::format("a step of {:.1f} ms in a block whose median step is {:.1f} ms "
                                                  "(over {:g}x): a stall, not the clocks; the block is run again",
                                                  1e3 * worst, 1e3 * med, o_.stall_factor)};
    events_.push_back(ev);
    out.push_back(ev);
    return out;
  }
  ArmTotals& t = b.arm == Arm::plan ? quad_.plan : quad_.base;
  t.steps += steps;
  for (double s : r.step_s) t.seconds += s;
  if (r.step_s.size() >= 2) {  // the block's halves (estimate.hpp, ArmTotals::half_var_sum)
    const std::size_t h = r.step_s.size() / 2, n = r.step_s.size();
    double first = 0, second = 0;
    for (std::size_t i = 0; i < n; ++i) (i < h ? first : second) += r.step_s[i];
    const double n1 = static_cast<double>(h), n2 = static_cast<double>(n - h), m1 = first / n1, m2 = second / n2;
    const double mean = (first + second) / static_cast<double>(n);
    t.half_var_sum += (m1 - m2) * (m1 - m2) / (1 / n1 + 1 / n2) / (mean * mean);
    ++t.half_blocks;
  }
  if (r.energy_seconds > 0 && r.joules > 0) {
    t.joules += r.joules;
    t.energy_seconds += r.energy_seconds;
  } else {
    VerifyEvent ev{blocks_, "no_tick", alpha(), alpha(), current(),
                   "no two energy-counter ticks inside the block: its quad gives no energy figure"};
    events_.push_back(ev);
    out.push_back(ev);
  }
  if (++quad_pos_ < 4) return out;
  // A quad whose energy rests on one arm's single block is still paired: each arm's power is over its own blocks.
  rungs_[cur_].quads.push_back(quad_);
  quad_ = {};
  quad_pos_ = 0;
  quad_done(out);
  return out;
}

AbEstimate Controller::reported() const {
  if (phase_ == Phase::baseline && !events_.empty()) {
    for (auto it = events_.rbegin(); it != events_.rend(); ++it)
      if (it->estimate.quads > 0) return it->estimate;
  }
  return current();
}

void Controller::quad_done(std::vector<VerifyEvent>& out) {
  if (!o_.decide) return;
  const AbEstimate e = current();
  const std::size_t q = e.quads;
  // A climbed rung still being verified: whatever fails it returns the loop to the held rung it climbed from.
  const bool climbing = phase_ == Phase::verifying && rungs_[cur_].climbed;
  if (e.saving && e.saving->hi < 0) {
    const std::string why =
        fmt::format("the rung costs energy with confidence: saving {} (measured)", interval_text(*e.saving));
    climbing ? climb_back(out, e, why) : to_baseline(out, e, "drop", why);
    return;
  }
  if (q >= o_.min_quads && e.slowdown.lo > o_.budget) {
    const std::string why = fmt::format("step time {} (measured) is over the {:.2f} % budget with confidence",
                                        interval_text(e.slowdown), 100 * o_.budget);
    climbing ? climb_back(out, e, why) : back_off(out, e, phase_ == Phase::held ? "recheck_over" : "back_off", why);
    return;
  }
  if (phase_ == Phase::held) {  // a steady-state quad that did not break anything: the next after a longer gap
    steady_gap_ = std::min(o_.steady_gap_max, steady_gap_ * 2);
    steady_left_ = steady_gap_;
    return;
  }
  // A rung holds when its step time is within the budget and, where energy is measured, its saving is above
  // zero with confidence: a plan that may cost energy is worth nothing to keep.
  // The saving is judged at a stricter level (kSavingConfidence): the rung is looked at after every quad, and a
  // saving near zero must not pass on one lucky look (simulated: 1 run in 40 kept a plan that cost 0.1 % at 95 %).
  const AbEstimate strict = estimate(rungs_[cur_].quads, std::max(o_.confidence, kSavingConfidence));  // not held yet: all
  const bool saves = !strict.saving || strict.saving->lo > 0;
  if (q >= o_.min_quads && e.slowdown.hi <= o_.budget && saves) {
    if (climbing) {  // worth keeping only if it saves more than the rung below, which is measured too
      const AbEstimate below = rung_estimate(rungs_[climb_from_]);
      if (e.saving && below.saving && e.saving->estimate <= below.saving->estimate) {
        climb_back(out, e,
                   fmt::format("step time {} is within the budget but the energy per step saving {} is no more than "
                               "the {} of the rung below (measured)",
                               interval_text(e.slowdown), interval_text(*e.saving), pct(below.saving->estimate)));
        return;
      }
    }
    phase_ = Phase::held;
    rungs_[cur_].held_at = q;
    steady_gap_ = o_.steady_gap_first;
    steady_left_ = steady_gap_;
    VerifyEvent ev{blocks_, "hold", alpha(), alpha(), e,
                   fmt::format("step time {} within the {:.2f} % budget{} (measured, {} quads, {} steps)",
                               interval_text(e.slowdown), 100 * o_.budget,
                               e.saving ? "; energy per step saving " + interval_text(*e.saving) : std::string(
                                   "; saving not measured (no energy counter windows)"),
                               q, e.steps)};
    events_.push_back(ev);
    out.push_back(ev);
    maybe_climb(out, e);
    return;
  }
  if (q >= o_.max_quads && e.slowdown.hi <= o_.budget) {
    const std::string why =
        fmt::format("after {} quads ({} steps) step time {} is within the budget but the energy per step "
                    "saving {} is not above zero with confidence",
                    q, e.steps, interval_text(e.slowdown), interval_text(*e.saving));
    climbing ? climb_back(out, e, why) : to_baseline(out, e, "no_saving", why + ": the baseline clocks");
    return;
  }
  if (q >= o_.max_quads) {
    // The distance the interval must resolve: from the estimate to the budget, on whichever side it lies.
    const std::size_t need = quads_to_resolve(std::max(e.sd_log_time, e.sd_floor),
                                              std::max(1e-4, std::abs(o_.budget - e.slowdown.estimate)), o_.confidence);
    const std::string why =
        fmt::format("after {} quads ({} steps) step time {} neither holds nor breaks the {:.2f} % budget: the "
                    "quads' step-time ratios scatter by {:.2f} % (sd), and resolving this rung needs about {} "
                    "quads ({} steps)",
                    q, e.steps, interval_text(e.slowdown), 100 * o_.budget, 100 * e.sd_log_time, need,
                    need * (e.steps / std::max<std::size_t>(q, 1)));
    climbing ? climb_back(out, e, why) : back_off(out, e, "undecided", why);
  }
}

// From the rung that just held toward the plan, bounded by the lowest rung above it that did not hold (backed off
// from, undecided or climbed back from; the plan itself at first). The next rung is the higher of two readings:
// the secant between the two rungs' measured slowdowns at margin x
// budget, which is right where the slowdown is linear in the clock shape, and the midpoint between the two rungs
// (a bisection), which is what finds the knee where it is not (measured kernel sweeps: flat over most of the
// ladder, then steep). No climb when the held rung's slowdown is over half of margin x budget, when the
// held rung is the plan, after max_climbs climbs, or when the new rung would be within 1/32 of the held one.
void Controller::maybe_climb(std::vector<VerifyEvent>& out, const AbEstimate& held) {
  if (climbs_ >= o_.max_climbs || alpha() >= 1) return;
  const Rung* ceiling = nullptr;
  for (const Rung& r : rungs_)
    if (r.alpha > alpha() && !r.outcome.empty() && (ceiling == nullptr || r.alpha < ceiling->alpha)) ceiling = &r;
  if (ceiling == nullptr) return;
  const double top = ceiling->alpha;
  const AbEstimate above = rung_estimate(*ceiling);
  // Room is judged on the estimate, not the interval's bound: the climbed rung must hold on its own quads to be
  // kept, so climbing risks quads, never the budget.
  const double target = o_.margin * o_.budget - held.slowdown.estimate;
  if (above.quads == 0 || !(held.slowdown.estimate < o_.margin * o_.budget / 2)) return;
  double to = (alpha() + top) / 2;
  const double s_held = shape(alpha()), s_above = shape(top);
  const double rise = above.slowdown.estimate - held.slowdown.estimate;
  if (s_above > s_held && rise > 0) {
    const double s_to = s_held + target * (s_above - s_held) / rise;
    to = std::max(to, shape_from_clocks_ ? ladder_.alpha_for_shape(s_to) : s_to);
  }
  to = std::min(to, top - 1.0 / 64);
  if (to < alpha() + 1.0 / 32) return;
  const double from = alpha();
  ++climbs_;
  climb_from_ = cur_;
  rungs_.push_back(Rung{to, {}, "", 0, true});
  cur_ = rungs_.size() - 1;
  phase_ = Phase::verifying;
  quad_ = {};
  quad_pos_ = 0;
  VerifyEvent ev{blocks_, "climb", from, to, held,
                 fmt::format("the held rung's step time {} leaves room under the {:.2f} % budget, and the rung at "
                             "{:.0f} % measured {}: climbing to {:.0f} % of the plan's clock reduction",
                             interval_text(held.slowdown), 100 * o_.budget, 100 * top, pct(above.slowdown.estimate),
                             100 * to)};
  events_.push_back(ev);
  out.push_back(ev);
}

void Controller::climb_back(std::vector<VerifyEvent>& out, const AbEstimate& e, const std::string& why) {
  const double from = alpha();
  rungs_[cur_].outcome = "climb_back";
  cur_ = climb_from_;
  phase_ = Phase::held;
  steady_gap_ = o_.steady_gap_first;
  steady_left_ = steady_gap_;
  quad_ = {};
  quad_pos_ = 0;
  VerifyEvent ev{blocks_, "climb_back", from, alpha(), e,
                 why + fmt::format("; back to the held rung at {:.0f} % of the plan's clock reduction", 100 * alpha())};
  events_.push_back(ev);
  out.push_back(ev);
  maybe_climb(out, current());  // between the held rung and the one just left, while climbs are left
}

// The regression's points: per quad of a rung above the baseline, (its clock shape, its log step-time ratio).
std::vector<std::pair<double, double>> Controller::shape_points() const {
  std::vector<std::pair<double, double>> pts;
  for (const Rung& r : rungs_) {
    const double s = shape(r.alpha);
    if (s <= 0) continue;
    for (const Quad& q : r.quads)
      if (q.plan.steps && q.base.steps) pts.emplace_back(s, std::log(q.plan.step_s() / q.base.step_s()));
  }
  return pts;
}

double Controller::sensitivity() const {
  double sxy = 0, sxx = 0;
  for (const auto& [s, x] : shape_points()) sxy += s * x, sxx += s * s;
  return sxx > 0 ? sxy / sxx : 0;
}

double Controller::sensitivity_upper() const {
  // Least squares through the origin of the quads' log step-time ratios on the rung's shape, its upper bound at
  // the controller's confidence (t with n - 1 degrees of freedom).
  const double k = sensitivity();
  const auto pts = shape_points();
  double sxx = 0, ss = 0;
  for (const auto& [s, x] : pts) ss += (x - k * s) * (x - k * s), sxx += s * s;
  if (pts.size() < 2 || sxx <= 0) return k;
  const double n = static_cast<double>(pts.size());
  return k + t_quantile(0.5 + o_.confidence / 2, n - 1) * std::sqrt(ss / (n - 1) / sxx);
}

void Controller::back_off(std::vector<VerifyEvent>& out, const AbEstimate& e, const std::string& kind,
                          const std::string& why) {
  const double from = alpha();
  if (rungs_.size() - climbs_ >= o_.max_rungs) {
    to_baseline(out, e, kind, why + fmt::format("; {} rungs tried: the baseline clocks", rungs_.size()));
    return;
  }
  const double k = sensitivity_upper();
  double to = k > 0 ? ladder_.alpha_for_shape(o_.margin * o_.budget / k) : from / 2;
  if (!shape_from_clocks_ && k > 0) to = std::min(1.0, o_.margin * o_.budget / k);
  if (to >= from) to = from / 2;
  if (to < 1.0 / 16) {
    to_baseline(out, e, kind, why + "; no rung of the plan fits the budget at the sensitivity measured: the "
                                    "baseline clocks");
    return;
  }
  rungs_[cur_].outcome = kind;
  rungs_.push_back(Rung{to, {}, ""});
  cur_ = rungs_.size() - 1;
  phase_ = Phase::verifying;
  quad_ = {};
  quad_pos_ = 0;
  VerifyEvent ev{blocks_, kind, from, to, e,
                 why + fmt::format("; the job's clock sensitivity measured {:.2f} (upper {:.2f}) of the clock shape: "
                                   "backing off to {:.0f} % of the plan's clock reduction",
                                   sensitivity(), k, 100 * to)};
  events_.push_back(ev);
  out.push_back(ev);
}

void Controller::to_baseline(std::vector<VerifyEvent>& out, const AbEstimate& e, const std::string& kind,
                             const std::string& why) {
  const double from = alpha();
  rungs_[cur_].outcome = kind;
  rungs_.push_back(Rung{0, {}, "baseline"});
  cur_ = rungs_.size() - 1;
  phase_ = Phase::baseline;
  VerifyEvent ev{blocks_, kind, from, 0, e, why};
  events_.push_back(ev);
  out.push_back(ev);
}

}  // namespace gearshift::verify
