#include "verify/clock_watch.hpp"

#include <fmt/core.h>

namespace gearshift::verify {

std::optional<std::string> ClockWatch::check(const std::vector<ClockSample>& samples, const BlockHold& hold) {
  if (samples.empty()) return std::nullopt;
  if (hold.none) {
    std::size_t held = 0;
    for (const ClockSample& s : samples) held += (s.reasons & kReasonApplicationsClocksSetting) != 0;
    if (!reference_) {
      // The block's majority is the GPU's own state before any change of ours or another's is judged.
      reference_ = 2 * held > samples.size();
      return std::nullopt;
    }
    const std::size_t differ = *reference_ ? samples.size() - held : held;
    if (differ == 0) return std::nullopt;
    return fmt::format("the GPU's clocks were changed by someone else: in a block where gearshift held no clock, NVML "
                       "reported the locked/application-clocks reason {} in {} of {} reads (it was {} when "
                       "verification began)",
                       *reference_ ? "off" : "on", differ, samples.size(), *reference_ ? "on" : "off");
  }
  if (!hold.sm_ceiling_mhz) return std::nullopt;
  unsigned top = 0;
  std::size_t over = 0, busy = 0;
  for (const ClockSample& s : samples) {
    if (s.reasons & kReasonGpuIdle) continue;  // an idle GPU's clock says nothing about the locks
    ++busy;
    if (s.sm_mhz > *hold.sm_ceiling_mhz + kSmSlackMhz) {
      ++over;
      if (s.sm_mhz > top) top = s.sm_mhz;
    }
  }
  if (over == 0) return std::nullopt;
  return fmt::format("the GPU's clocks were changed by someone else: gearshift locked the SM clock at {} MHz at most, "
                     "NVML read up to {} MHz in {} of {} reads of the busy GPU",
                     *hold.sm_ceiling_mhz, top, over, busy);
}

}  // namespace gearshift::verify
