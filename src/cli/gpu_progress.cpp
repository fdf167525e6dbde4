#include "cli/gpu_progress.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <cstdlib>

#include <fmt/core.h>

#include "cupti/config.hpp"

namespace gearshift::cli {

ProgressControl::ProgressControl(GpuProgress mode, int control_fd) : mode_(mode), fd_(control_fd) {
  // Never block on a job that stopped reading (its pipe buffer is full): a lost command only costs overhead.
  if (fd_ >= 0) fcntl(fd_, F_SETFL, fcntl(fd_, F_GETFL) | O_NONBLOCK);
}

ProgressControl::~ProgressControl() {
  if (fd_ >= 0) close(fd_);
}

void ProgressControl::set_job_env(bool collect_first) {
  if (mode_ != GpuProgress::sync) return;
  if (std::getenv(cupti::kEnvFeedActivityPeriodMs) != nullptr) {  // the user's own sampling
    sampling_ = true;
    user_sampling_ = true;
    return;
  }
  if (collect_first) return;
  // No kernel activity until the runtime follows the job (on_event then sends the windows).
  setenv(cupti::kEnvFeedActivityPeriodMs, std::to_string(kAuditPeriodMs).c_str(), 1);
  setenv(cupti::kEnvFeedActivityWindowMs, "0", 1);
}

void ProgressControl::send(int period_ms, int window_ms) {
  std::lock_guard lock(write_mu_);
  if (fd_ < 0) return;
  const std::string line = fmt::format("A {} {}\n", period_ms, window_ms);
  if (write(fd_, line.data(), line.size()) != static_cast<ssize_t>(line.size()))
    fmt::print(stderr, "gearshift run: note: could not tell the job to change its kernel activity\n");
}

void ProgressControl::fall_back(runtime::LiveRuntime& rt) {
  if (switched_.exchange(true)) return;
  send(0, 0);
  rt.set_anchor_on_completions(true);
}

void ProgressControl::on_event(const runtime::FeedEvent& e, runtime::LiveRuntime* rt) {
  if (e.kind == runtime::FeedEvent::Kind::sync) {
    ++syncs_;
    launches_since_sync_ = 0;
    if (mode_ == GpuProgress::sync && rt != nullptr && !switched_ && !sampling_.exchange(true))
      send(kAuditPeriodMs, kAuditWindowMs);
    return;
  }
  if (e.kind != runtime::FeedEvent::Kind::launch || mode_ != GpuProgress::sync || rt == nullptr || switched_) return;
  const std::size_t n = template_kernels_.load();
  if (n > 0 && ++launches_since_sync_ > kNoSyncFallbackSteps * n) fall_back(*rt);
}

void ProgressControl::plan_ready(runtime::LiveRuntime& rt) {
  if (mode_ != GpuProgress::sync) return;
  if (syncs_.load() == 0) {
    switched_ = true;  // every kernel's activity is still on: keep it, anchor on it
    rt.set_anchor_on_completions(true);
    return;
  }
  if (!sampling_.exchange(true)) send(kAuditPeriodMs, kAuditWindowMs);
}

std::string ProgressControl::summary() const {
  if (mode_ == GpuProgress::activity)
    return "GPU progress from every kernel's activity (--gpu-progress activity, or a trace file being written)";
  if (switched_)
    return fmt::format("GPU progress from every kernel's activity: the job did not synchronize ({} synchronizes "
                       "seen; none in {} steps of launches)",
                       syncs_.load(), kNoSyncFallbackSteps);
  const std::string sampled = user_sampling_ ? std::string("as GEARSHIFT_FEED_ACTIVITY_* say")
                                             : fmt::format("{} of every {} ms", kAuditWindowMs, kAuditPeriodMs);
  return fmt::format("GPU progress from the job's {} synchronizes; kernel activity sampled ({}): the in-time "
                     "fraction is measured on those kernels",
                     syncs_.load(), sampled);
}

}  // namespace gearshift::cli
