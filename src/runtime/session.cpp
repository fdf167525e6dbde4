#include "runtime/session.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <cstdio>
#include <utility>

#include <fmt/core.h>

#include "runtime/feed.hpp"
#include "trace/line_split.hpp"

namespace gearshift::runtime {

namespace {

using Kind = SessionError::Kind;

[[noreturn]] void nvml_failed(const gpu::NvmlError& e, const std::string& path) {
  if (e.code == gpu::NvmlErrc::kNoPermission) throw SessionError(Kind::kNoPermission, "NVML refuses this user: " + e.what());
  const std::string hint = e.code == gpu::NvmlErrc::kLibraryMissing
                               ? " (no NVIDIA driver here? GEARSHIFT_NVML_LIBRARY may name another library)"
                               : "";
  throw SessionError(Kind::kNoGpu, "no GPU: NVML (" + path + ") " + e.what() + hint);
}

}  // namespace

Session::Session(SessionOptions options) : o_(std::move(options)) {
  try {
    dry_ = std::make_unique<DryRunActuator>(o_.dry_run_log);
  } catch (const std::runtime_error& e) {
    throw SessionError(Kind::kBadOutput, e.what());
  }
  act_ = dry_.get();
  if (o_.apply) {
    // Every refusal before anything is locked: the job then runs as the user asked or not at all.
    const std::string path = gpu::Nvml::default_library_path();
    auto nvml = gpu::Nvml::open(path);
    if (!nvml) nvml_failed(nvml.error(), path);
    nvml_ = nvml.value();
    auto all = nvml_->devices();
    if (!all) nvml_failed(all.error(), path);
    if (o_.gpu >= all.value().size())
      throw SessionError(Kind::kNoGpu, fmt::format("GPU {} does not exist (NVML sees {})", o_.gpu, all.value().size()));
    const gpu::Device dev = all.value()[o_.gpu];
    auto info = dev.info();
    if (!info) nvml_failed(info.error(), path);
    std::string reason;
    if (!may_set_clocks(process_is_privileged(), dev.clocks_api_restricted().value_or(true), &reason))
      throw SessionError(Kind::kNoPermission, "this process may not set GPU clocks (" + reason + ")");
    try {
      lock_ = std::make_unique<GpuLock>(info.value().uuid);
      if (!o_.watchdog_exe.empty())
        watchdog_ = std::make_unique<Watchdog>(o_.watchdog_exe, info.value().uuid, *lock_, o_.lock_memory);
    } catch (const GpuBusyError& e) {
      throw SessionError(Kind::kGpuBusy, e.what());
    } catch (const std::runtime_error& e) {
      throw SessionError(Kind::kFailure, e.what());
    }
    if (!watchdog_)
      std::fprintf(stderr, "gearshift: warning: no watchdog (no gearshift executable given): if this process is "
                           "killed, GPU %u keeps its locked clocks until `nvidia-smi -rgc` or a reboot\n", o_.gpu);
    nvml_act_ = std::make_unique<NvmlActuator>(dev, o_.lock_memory, *dry_);
    act_ = nvml_act_.get();
  }
  if (o_.record_changes) {
    recorder_ = std::make_unique<RecordingActuator>(*act_);
    act_ = recorder_.get();
  }
  if (o_.pipe_feed) {
    int p[2];
    if (pipe(p) != 0) throw SessionError(Kind::kFailure, "cannot create the launch feed pipe");
    fcntl(p[0], F_SETFD, FD_CLOEXEC);  // the write end stays inheritable: an in-process hook writes it
    read_fd_ = p[0], write_fd_ = p[1];
    reader_ = std::thread([this] { read_loop(); });
  }
}

Session::~Session() { stop(); }

void Session::start(const ClockPlan& plan, const SchedulerOptions& options) {
  if (stopped_.load()) throw std::logic_error("Session::start after stop");
  if (rt_) throw std::logic_error("Session::start called twice");
  rt_ = std::make_unique<LiveRuntime>(plan, options, *act_);
  stats_.started = true;
  live_.store(rt_.get());
}

bool Session::feed(const feed::FeedEvent& e) noexcept {
  LiveRuntime* r = live_.load();
  if (r == nullptr) return false;
  feed_event(e, *r);
  return true;
}

bool Session::feed_line(std::string_view line) noexcept {
  LiveRuntime* r = live_.load();
  return r != nullptr && runtime::feed_line(line, *r);
}

void Session::read_loop() {
  std::string buf;
  char chunk[4096];
  for (;;) {
    const ssize_t n = read(read_fd_, chunk, sizeof chunk);
    if (n <= 0) break;  // EOF: stop() closed the write end (and every other holder closed theirs)
    trace::for_each_line(buf, std::string_view(chunk, static_cast<std::size_t>(n)),
                         [&](std::string_view l) { feed_line(l); });
  }
}

std::vector<ClockChange> Session::changes() const { return recorder_ ? recorder_->changes() : std::vector<ClockChange>{}; }
bool Session::changes_lost() const { return recorder_ && recorder_->lost(); }

SessionStats Session::stop() {
  if (stopped_.exchange(true)) return stats_;
  if (write_fd_ >= 0) close(write_fd_), write_fd_ = -1;
  if (reader_.joinable()) reader_.join();
  if (read_fd_ >= 0) close(read_fd_), read_fd_ = -1;
  live_.store(nullptr);
  if (rt_) stats_.live = rt_->stop();  // restores the default clocks
  stats_.wrote_clocks = act_->writes_clocks();
  watchdog_.reset();  // after the restore: tells it "restored", then reaps it
  lock_.reset();
  stats_.dry_run_changes = dry_->count();
  // The dry-run log is flushed and closed with dry_ at destruction: the actuators stay valid for a caller
  // still holding live() (a feed thread that loaded it before this stop).
  std::fflush(nullptr);
  return stats_;
}

}  // namespace gearshift::runtime
