// Whether someone other than gearshift changed the GPU's clocks while a block ran: a verdict from blocks whose
// clocks were not the ones gearshift meant would be about the other setter (an admin's `nvidia-smi -lgc`, a
// scheduler's power policy, a second tool), not about the plan. Pure logic over NVML samples taken inside each
// block's measured steps (service/verify_run reads them at the energy counter's ticks).
//
// Two signs, each one NVML can give without a clock being touched by the check:
//  - In a block where gearshift holds no lock (a dry run, a baseline block, a rung at the default clocks), the
//    clock-event reason "applications clocks setting" (NVML's nvmlClocksEventReasonApplicationsClocksSetting,
//    0x2: clocks held by locked or application clocks; NVML API reference, "NvmlClocksEventReasons") differs from
//    what it was in the first such block: a lock was set, or one that was there before gearshift started was taken
//    away. A state that holds from the start is the GPU's own baseline and is left alone.
//  - In a block where gearshift locks the SM clock at every position, the sampled SM clock above the highest of
//    its locks by more than kSmSlackMhz while the GPU is not idle: the locks were reset or raised.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace gearshift::verify {

inline constexpr std::uint64_t kReasonGpuIdle = 0x1;                    // nvmlClocksEventReasonGpuIdle
inline constexpr std::uint64_t kReasonApplicationsClocksSetting = 0x2;  // nvmlClocksEventReasonApplicationsClocksSetting
// A sampled SM clock may sit one or two supported steps (15 MHz apart on Hopper) off the lock.
inline constexpr unsigned kSmSlackMhz = 30;

// One NVML read: the SM clock (MHz) and the clock-event reason bits.
struct ClockSample {
  unsigned sm_mhz = 0;
  std::uint64_t reasons = 0;
};

// What gearshift held in a block: nothing (no lock at any position), or an SM lock at every position with
// `sm_ceiling_mhz` the highest; otherwise (some positions locked, some not) neither sign applies.
struct BlockHold {
  bool none = false;
  std::optional<unsigned> sm_ceiling_mhz;
};

class ClockWatch {
 public:
  // The samples of one block (in order) and what gearshift held in it. Returns why the clocks were not gearshift's
  // (plain words, with the NVML figures), or nullopt. A block without samples says nothing.
  std::optional<std::string> check(const std::vector<ClockSample>& samples, const BlockHold& hold);
  // The reason bit's state in the first hold-free block with samples (nullopt before one).
  std::optional<bool> reference() const { return reference_; }

 private:
  std::optional<bool> reference_;
};

}  // namespace gearshift::verify
