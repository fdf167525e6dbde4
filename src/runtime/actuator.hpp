// Actuators: where the scheduler's clock changes go. One interface; dry-run (the default: log only), NVML
// locked clocks (only with --apply), and through NVML's ABI the simulated GPU in tests.
// apply/restore never throw (they run on the runtime thread and in signal-driven shutdown paths).
#pragma once

#include <cstdint>
#include <cstdio>
#include <mutex>
#include <string>
#include <vector>

#include "gpu/nvml.hpp"
#include "runtime/scheduler.hpp"

namespace gearshift::runtime {

class Actuator {
 public:
  virtual ~Actuator() = default;
  virtual const char* name() const = 0;
  // Makes (or records) one change; false when it failed (the reason went to stderr once).
  virtual bool apply(const ClockChange& change, std::size_t template_size) noexcept = 0;
  // Back to the GPU's default clocks (unlocked). Idempotent.
  virtual void restore() noexcept = 0;
  // True when it writes clocks (false for dry-run, and after an NVML actuator fell back to dry-run).
  virtual bool writes_clocks() const noexcept = 0;
};

// Appends every intended change as one JSON line: {"wall_ns","gpu_ns","position","template_position",
// "sm_clock_mhz","mem_clock_mhz","default","late"} (ns on the runtime's clock; gpu_ns is the estimated GPU
// time of the boundary). An empty path keeps no log (counts only).
class DryRunActuator final : public Actuator {
 public:
  explicit DryRunActuator(const std::string& log_path);
  ~DryRunActuator() override;
  DryRunActuator(const DryRunActuator&) = delete;
  DryRunActuator& operator=(const DryRunActuator&) = delete;
  const char* name() const override { return "dry-run"; }
  bool apply(const ClockChange& change, std::size_t template_size) noexcept override;
  void restore() noexcept override {}
  bool writes_clocks() const noexcept override { return false; }
  std::uint64_t count() const;

 private:
  mutable std::mutex mu_;
  std::FILE* log_ = nullptr;
  std::uint64_t count_ = 0;
};

// Locked SM clocks (min = max = the wanted clock) and, when `lock_memory`, locked memory clocks. The first
// kNoPermission prints one warning and turns it into its dry-run fallback for the rest of the run.
class NvmlActuator final : public Actuator {
 public:
  NvmlActuator(gpu::Device device, bool lock_memory, Actuator& fallback);
  const char* name() const override { return "nvml"; }
  bool apply(const ClockChange& change, std::size_t template_size) noexcept override;
  void restore() noexcept override;
  bool writes_clocks() const noexcept override;
  std::uint64_t failures() const;

 private:
  gpu::Device dev_;
  bool lock_memory_;
  Actuator& fallback_;
  mutable std::mutex mu_;
  bool denied_ = false;
  bool touched_ = false;  // something was locked: restore must reset
  bool mem_unsupported_ = false;
  std::uint64_t failures_ = 0;
};

// Passes every change on to `inner` and keeps a copy (the runtime thread calls apply: it never throws).
class RecordingActuator final : public Actuator {
 public:
  explicit RecordingActuator(Actuator& inner) : inner_(inner) {}
  const char* name() const override { return inner_.name(); }
  bool apply(const ClockChange& change, std::size_t template_size) noexcept override;
  void restore() noexcept override { inner_.restore(); }
  bool writes_clocks() const noexcept override { return inner_.writes_clocks(); }
  std::vector<ClockChange> changes() const;  // in the order they were applied
  bool lost() const;  // a change could not be kept (out of memory): the timeline misses some

 private:
  Actuator& inner_;
  mutable std::mutex mu_;
  std::vector<ClockChange> changes_;
  bool lost_ = false;
};

}  // namespace gearshift::runtime
