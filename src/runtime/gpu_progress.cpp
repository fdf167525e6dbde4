#include "runtime/gpu_progress.hpp"

#include <cstdlib>
#include <stdexcept>

#include <fmt/core.h>

#include "cupti/config.hpp"

namespace gearshift::runtime {

GpuProgress parse_gpu_progress(const std::string& name) {
  if (name == "markers") return GpuProgress::markers;
  if (name == "sync") return GpuProgress::sync;
  if (name == "activity") return GpuProgress::activity;
  throw std::invalid_argument("--gpu-progress " + name + ": expected markers, sync or activity");
}

ProgressControl::ProgressControl(GpuProgress mode, std::function<bool(const std::string&)> to_followed)
    : mode_(mode), to_followed_(std::move(to_followed)) {}

void ProgressControl::set_job_env(bool collect_first) {
  if (mode_ != GpuProgress::markers) {
    setenv(cupti::kEnvFeedMarkerUs, "0", 1);  // what the mode says, whatever the environment had
    if (mode_ == GpuProgress::activity) return;
  } else if (std::getenv(cupti::kEnvFeedMarkerUs) != nullptr) {
    user_markers_ = true;  // the user's period (0: none)
  } else if (!collect_first) {
    setenv(cupti::kEnvFeedMarkerUs, std::to_string(kMarkerPeriodNs / 1'000).c_str(), 1);
  }
  if (std::getenv(cupti::kEnvFeedActivityPeriodMs) != nullptr) {  // the user's own sampling
    sampling_ = true;
    user_sampling_ = true;
    return;
  }
  if (collect_first) return;
  // No kernel activity until the runtime follows the job (on_event then sends the windows).
  setenv(cupti::kEnvFeedActivityPeriodMs, std::to_string(kAuditPeriodNs / 1'000'000).c_str(), 1);
  setenv(cupti::kEnvFeedActivityWindowMs, "0", 1);
}

bool ProgressControl::send(const std::string& line) {
  // Never blocks on a job that stopped reading: a lost command only costs overhead.
  if (to_followed_(line)) return true;
  fmt::print(stderr, "gearshift run: note: could not tell the job to change its kernel activity or markers\n");
  return false;
}

void ProgressControl::start_sampling() {
  if (!switched_ && !sampling_.exchange(true)) send(feed::activity_command(kAuditPeriodNs, kAuditWindowNs));
}

void ProgressControl::set_plan(const ClockPlan& kernels) {
  template_kernels_ = kernels.size();
  pair_ = kernels.one_pair();
  fallback_ = kernels.in_time_fallback;
  one_pair_ = pair_.has_value();
}

void ProgressControl::fell_back_to_one_pair() {
  if (one_pair_ || !fallback_) return;
  pair_ = fallback_;
  fell_back_ = true;
  one_pair_ = true;
  // The sampled windows measured the in-time fraction of changes inside the step; there are none now. Where the
  // job is followed by every kernel's activity (no other sign of progress), that stays: it is the anchor.
  if (sampling_ && !switched_ && !user_sampling_) sampling_stopped_ = send(feed::activity_command(kAuditPeriodNs, 0));
}

void ProgressControl::stop_markers() {
  if (mode_ == GpuProgress::markers && !user_markers_ && !markers_stopped_.exchange(true))
    send(feed::marker_command(0));
}

bool ProgressControl::turn_feed_off(std::uint64_t at_step, std::int64_t followed_ns) {
  if (!one_pair_ || mode_ == GpuProgress::activity || user_markers_ || user_sampling_ || feed_off_.exchange(true))
    return false;
  feed_off_step_ = at_step;
  feed_off_after_ns_ = followed_ns;
  feed_off_sent_ = send(feed::off_command());
  return feed_off_sent_;
}

void ProgressControl::fall_back(LiveRuntime& rt) {
  if (switched_.exchange(true)) return;
  send(feed::activity_command(0, 0));
  rt.set_anchor_on_completions(true);
}

void ProgressControl::on_event(const feed::FeedEvent& e, LiveRuntime* rt) {
  using Kind = feed::FeedEvent::Kind;
  if (e.kind == Kind::sync || e.kind == Kind::marker) {
    ++(e.kind == Kind::sync ? syncs_ : markers_);
    launches_since_anchor_ = 0;
    first_since_anchor_ns_ = -1;
    if (mode_ == GpuProgress::activity || rt == nullptr) return;
    // One pair: markers until the runtime holds an anchor (it has set the pair then, when locked); no sampling.
    if (!one_pair_) start_sampling();
    else if (rt->anchored() && rt->locked()) stop_markers();
    return;
  }
  if (e.kind != Kind::launch || mode_ == GpuProgress::activity || rt == nullptr || switched_) return;
  // Only launches of the job's steps count: a model's initialisation launches thousands of kernels before
  // its first synchronize (measured: GPT-2 small fell back to every kernel's activity before its first step).
  if (!rt->locked()) return;
  // One pair, set once the runtime held an anchor: nothing is left to time, however long the job goes without one.
  if (one_pair_ && rt->anchored()) return;
  const std::size_t n = template_kernels_.load();
  if (first_since_anchor_ns_ < 0) first_since_anchor_ns_ = e.cpu_ns;
  if (n > 0 && ++launches_since_anchor_ > kNoSyncFallbackSteps * n &&
      e.cpu_ns - first_since_anchor_ns_ >= kNoAnchorFallbackNs)
    fall_back(*rt);
}

void ProgressControl::plan_ready(LiveRuntime& rt, std::uint64_t warmup_syncs) {
  if (mode_ == GpuProgress::activity) return;
  if (mode_ == GpuProgress::markers && !user_markers_) send(feed::marker_command(kMarkerPeriodNs));
  syncs_ += warmup_syncs;
  if (mode_ == GpuProgress::sync && syncs_.load() == 0) {
    switched_ = true;  // every kernel's activity is still on: keep it, anchor on it
    rt.set_anchor_on_completions(true);
    return;
  }
  if (!one_pair_) start_sampling();
}

std::string ProgressControl::others_commands() const {
  // activity mode: every kernel's activity is the mode's promise (and a trace file may be written): left alone.
  if (mode_ == GpuProgress::activity) return "";
  std::string lines;
  if (!user_sampling_) lines += feed::activity_command(kAuditPeriodNs, 0);
  if (!user_markers_) lines += feed::marker_command(0);
  return lines;
}

std::string ProgressControl::summary() const {
  if (mode_ == GpuProgress::activity)
    return "GPU progress from every kernel's activity (--gpu-progress activity, or a trace file being written)";
  // A plan of one pair's feed turned off (turn_feed_off): said whichever way the runtime followed the job before.
  const std::string off =
      !feed_off_       ? std::string()
      : feed_off_sent_ ? fmt::format("; the launch feed was turned off at step {}, {:.1f} s after the pair was set: "
                                     "the job ran on untraced at that pair to its end (the steps, launches and energy "
                                     "here count up to then)",
                                     feed_off_step_, static_cast<double>(feed_off_after_ns_) * 1e-9)
                       : fmt::format("; the job could not be told to turn its launch feed off at step {} (its "
                                     "connection took no command): it stayed traced",
                                     feed_off_step_);
  if (switched_)
    return fmt::format("GPU progress from every kernel's activity: no other sign of it ({} synchronizes, {} stream "
                       "markers seen; none in {} steps of launches and {:g} s)",
                       syncs_.load(), markers_.load(), kNoSyncFallbackSteps, kNoAnchorFallbackNs * 1e-9) +
           off;
  if (one_pair_ && fell_back_)
    return fmt::format("GPU progress from the job's {} synchronizes and {} stream markers{}; kernel activity "
                       "sampled ({} of every {} ms) until the in-time guard fell back to one clock pair for the whole "
                       "step (SM {} MHz, memory {} MHz){}: no change inside the step can be late since",
                       syncs_.load(), markers_.load(),
                       markers_stopped_ ? " (markers stopped once the runtime held an anchor after the fall-back)" : "",
                       kAuditWindowNs / 1'000'000, kAuditPeriodNs / 1'000'000, pair_->sm_mhz, pair_->mem_mhz,
                       user_sampling_     ? ", and as GEARSHIFT_FEED_ACTIVITY_* say after it"
                       : sampling_stopped_ ? ", none after it"
                                           : "") +
           off;
  if (one_pair_ && !user_sampling_)
    return fmt::format("GPU progress from the job's {} synchronizes and {} stream markers{}; no kernel activity "
                       "sampled: the plan is one clock pair for the whole step (SM {} MHz, memory {} MHz), so no "
                       "change inside the step can be late",
                       syncs_.load(), markers_.load(),
                       markers_stopped_ ? " (markers stopped once the runtime held an anchor and had set the pair)"
                                        : "",
                       pair_->sm_mhz, pair_->mem_mhz) +
           off;
  const std::string sampled = user_sampling_ ? std::string("as GEARSHIFT_FEED_ACTIVITY_* say")
                                             : fmt::format("{} of every {} ms", kAuditWindowNs / 1'000'000, kAuditPeriodNs / 1'000'000);
  return fmt::format("GPU progress from the job's {} synchronizes and {} stream markers; kernel activity sampled "
                     "({}): the in-time fraction is measured on those kernels",
                     syncs_.load(), markers_.load(), sampled);
}

}  // namespace gearshift::runtime
