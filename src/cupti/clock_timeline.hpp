// Recent clock/power samples per device, so that each kernel gets the clock it really ran at: the sample
// nearest its midpoint. A bounded ring per device (old samples fall out); thread-safe.
#pragma once

#include <cstddef>
#include <mutex>
#include <optional>
#include <vector>

#include "trace/record.hpp"

namespace gearshift::cupti {

class ClockTimeline {
 public:
  // `capacity` samples kept per device (at 10 ms a sample, 4096 cover 40 s: far more than the delay between
  // a kernel's end and CUPTI handing us its record).
  explicit ClockTimeline(std::size_t capacity = 4096);

  // Samples must come in time order per device (the sampler thread's order); out-of-order ones are ignored.
  void add(const trace::DeviceSample& s);
  // The sample of `device` nearest to `time_ns`, or none when the device has no sample.
  std::optional<trace::DeviceSample> nearest(int device, std::int64_t time_ns) const;

 private:
  struct Ring {
    std::vector<trace::DeviceSample> buf;  // circular, `head` = index of the oldest once full
    std::size_t head = 0;
    const trace::DeviceSample& at(std::size_t i) const { return buf[(head + i) % buf.size()]; }
  };
  std::size_t capacity_;
  mutable std::mutex mu_;
  std::vector<Ring> rings_;  // indexed by device
};

}  // namespace gearshift::cupti
