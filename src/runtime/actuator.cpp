#include "runtime/actuator.hpp"

#include <fmt/core.h>

namespace gearshift::runtime {

DryRunActuator::DryRunActuator(const std::string& log_path) {
  if (!log_path.empty()) {
    log_ = std::fopen(log_path.c_str(), "a");
    if (!log_) throw std::runtime_error(log_path + ": cannot open the dry-run log for appending");
  }
}

DryRunActuator::~DryRunActuator() {
  if (log_) std::fclose(log_);
}

bool DryRunActuator::apply(const ClockChange& c, std::size_t n) noexcept {
  std::lock_guard<std::mutex> g(mu_);
  ++count_;
  if (!log_) return true;
  const long long tp = c.position < 0 || n == 0 ? -1 : static_cast<long long>(c.position % static_cast<std::int64_t>(n));
  int rc = std::fprintf(log_,
                        "{\"wall_ns\":%lld,\"gpu_ns\":%lld,\"position\":%lld,\"template_position\":%lld,"
                        "\"sm_clock_mhz\":%d,\"mem_clock_mhz\":%d,\"default\":%s,\"late\":%s}\n",
                        static_cast<long long>(c.issue_ns), static_cast<long long>(c.boundary_ns),
                        static_cast<long long>(c.position), tp, c.clocks.sm_mhz, c.clocks.mem_mhz,
                        c.is_default ? "true" : "false", c.late ? "true" : "false");
  return rc > 0;
}

std::uint64_t DryRunActuator::count() const {
  std::lock_guard<std::mutex> g(mu_);
  return count_;
}

NvmlActuator::NvmlActuator(gpu::Device device, bool lock_memory, Actuator& fallback)
    : dev_(std::move(device)), lock_memory_(lock_memory), fallback_(fallback) {}

bool NvmlActuator::writes_clocks() const noexcept {
  std::lock_guard<std::mutex> g(mu_);
  return !denied_;
}

std::uint64_t NvmlActuator::failures() const {
  std::lock_guard<std::mutex> g(mu_);
  return failures_;
}

bool NvmlActuator::apply(const ClockChange& c, std::size_t n) noexcept {
  std::unique_lock<std::mutex> g(mu_);
  if (denied_) {
    g.unlock();
    return fallback_.apply(c, n);
  }
  auto sm = c.is_default ? dev_.reset_locked_sm_clocks()
                         : dev_.set_locked_sm_clocks(static_cast<unsigned>(c.clocks.sm_mhz),
                                                     static_cast<unsigned>(c.clocks.sm_mhz));
  if (!sm && sm.error().code == gpu::NvmlErrc::kNoPermission) {
    denied_ = true;
    std::fprintf(stderr,
                 "gearshift: warning: no permission to lock clocks (%s); continuing as dry-run "
                 "(run as root or with CAP_SYS_ADMIN to apply)\n",
                 sm.error().what().c_str());
    g.unlock();
    return fallback_.apply(c, n);
  }
  if (!sm) {
    if (failures_++ == 0) std::fprintf(stderr, "gearshift: warning: %s\n", sm.error().what().c_str());
    return false;
  }
  touched_ = true;
  if (lock_memory_ && !mem_unsupported_) {
    auto mem = c.is_default ? dev_.reset_locked_mem_clocks()
                            : dev_.set_locked_mem_clocks(static_cast<unsigned>(c.clocks.mem_mhz),
                                                         static_cast<unsigned>(c.clocks.mem_mhz));
    if (!mem && (mem.error().code == gpu::NvmlErrc::kNotSupported || mem.error().code == gpu::NvmlErrc::kFunctionMissing)) {
      mem_unsupported_ = true;  // SM clocks alone still apply
    } else if (!mem) {
      if (failures_++ == 0) std::fprintf(stderr, "gearshift: warning: %s\n", mem.error().what().c_str());
      return false;
    }
  }
  return true;
}

void NvmlActuator::restore() noexcept {
  std::lock_guard<std::mutex> g(mu_);
  if (denied_ || !touched_) return;
  auto sm = dev_.reset_locked_sm_clocks();
  if (!sm) std::fprintf(stderr, "gearshift: warning: restoring SM clocks: %s\n", sm.error().what().c_str());
  if (lock_memory_ && !mem_unsupported_) {
    auto mem = dev_.reset_locked_mem_clocks();
    if (!mem) std::fprintf(stderr, "gearshift: warning: restoring memory clocks: %s\n", mem.error().what().c_str());
  }
  touched_ = false;
}

bool RecordingActuator::apply(const ClockChange& change, std::size_t template_size) noexcept {
  {
    std::lock_guard<std::mutex> g(mu_);
    try {
      changes_.push_back(change);
    } catch (...) {
      lost_ = true;
    }
  }
  return inner_.apply(change, template_size);
}

std::vector<ClockChange> RecordingActuator::changes() const {
  std::lock_guard<std::mutex> g(mu_);
  return changes_;
}

bool RecordingActuator::lost() const {
  std::lock_guard<std::mutex> g(mu_);
  return lost_;
}

}  // namespace gearshift::runtime
