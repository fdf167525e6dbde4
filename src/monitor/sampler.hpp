// The sampler: one thread that reads every GPU's energy counter, power, clocks and temperature, and measures
// named windows (Zeus-style begin/end; nested and overlapping windows allowed).
//
// NVML is only ever called on the sampler's own thread: one energy-counter read took ≈4 ms on a real H200
// (docs/design.md), far too long for a training thread. begin() only notes the time and wakes the sampler; end()
// waits until the sampler has located the counter's next step after the window's end (≤ one counter period plus
// one read, ≈100 ms on H200), so a window's energy is not off by a counter period at either end (energy.hpp).
//
// Per GPU and window: energy from the counter (exact up to power-estimate error over ≤ one period per end);
// from instant-power samples (trapezoid) when the window is shorter than the counter period or the GPU has no
// counter — then marked approximate. A GPU that is lost mid-window reports the energy before the loss, marked.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "gpu/nvml.hpp"
#include "monitor/energy.hpp"

namespace gearshift::monitor {

Ns now_ns();  // steady clock, ns
// ns as s, for the faces that print or return seconds (`gearshift monitor`'s table and JSON, Python's time_s).
inline double to_s(Ns ns) { return static_cast<double>(ns) * 1e-9; }

// One full sample of one GPU (what the CSV/JSONL log and the Prometheus endpoint show).
struct GpuSample {
  unsigned gpu = 0;  // NVML index
  Ns t = 0;          // steady clock, ns
  std::optional<std::uint64_t> energy_counter_mj;  // raw NVML counter, mJ
  double energy_j = 0;                             // energy since the sampler started, J (counter or ∫P)
  std::optional<double> power_w;                   // instant power, W
  std::optional<unsigned> sm_clock_mhz, mem_clock_mhz, temperature_c;
  std::optional<std::uint64_t> clock_event_reasons;  // NVML bits
};

struct GpuWindow {
  unsigned gpu = 0;
  double energy_j = 0;      // J
  Ns time_ns = 0;           // steady clock, ns
  double avg_power_w = 0;   // energy / time, W
  double peak_power_w = 0;  // highest instant-power sample inside the window (nearest one if none inside), W
  bool approximate = false; // energy from power samples or plain counter differences, not a located tick
  std::string method;       // "counter", "power", "counter-reads"
  bool lost = false;        // the GPU was lost inside the window; figures cover the time before
};

struct WindowResult {
  std::string name;
  Ns begin_ns = 0, end_ns = 0;  // steady clock
  Ns time_ns = 0;  // end_ns - begin_ns
  std::vector<GpuWindow> gpus;
};

struct SamplerOptions {
  std::chrono::milliseconds interval{100};          // full sample period
  std::chrono::nanoseconds counter_period{100'000'000};  // NVML counter update period (GpuSpec's, 100 ms)
  // Between window edges the counter is read only this often: one read cost 3.95 ms of CPU on an H200
  // (measured, bench/results/2026-11-30-energy-measurement.md), 4 % of a core at 100 ms. Power (≈10 µs a read) is read
  // every interval.
  std::chrono::milliseconds counter_interval{1000};
  std::chrono::microseconds burst_gap{1000};        // between reads while locating a tick after an edge
  std::chrono::milliseconds precise{15};            // a tick located within this span counts as located
  std::function<void(const GpuSample&)> on_sample;  // called on the sampler thread after each full sample
  std::function<void(const std::string&)> on_note;  // one-line notices (fallbacks, lost GPUs), once each
};

class Sampler {
 public:
  // Starts the thread. `devices` must not be empty.
  Sampler(std::vector<gpu::Device> devices, SamplerOptions options = {});
  ~Sampler();  // stops and joins
  Sampler(const Sampler&) = delete;
  Sampler& operator=(const Sampler&) = delete;

  // Throws std::invalid_argument if a window of that name is open (begin) or not open (end).
  void begin(const std::string& name);
  WindowResult end(const std::string& name);

  std::vector<GpuSample> latest() const;  // last full sample per GPU (empty before the first)
  const std::vector<gpu::DeviceInfo>& devices() const { return infos_; }

 private:
  struct GpuState;
  struct EdgeValue;
  struct Edge;
  struct Window;

  void run();
  void read_gpu(GpuState& g, bool full, bool burst, std::vector<GpuSample>& out);
  void resolve_edges(Ns now);
  void note(const std::string& text);
  GpuWindow finish(const Window& w, std::size_t i) const;

  SamplerOptions opt_;
  std::vector<gpu::DeviceInfo> infos_;
  std::vector<std::unique_ptr<GpuState>> gpus_;  // touched by the sampler thread; edges resolved under mu_
  mutable std::mutex mu_;
  std::condition_variable cv_;       // wakes the sampler (poke, stop)
  std::condition_variable done_cv_;  // wakes end() when an edge resolves
  bool stop_ = false, poke_ = false;
  std::vector<std::shared_ptr<Edge>> pending_;
  std::map<std::string, std::unique_ptr<Window>> windows_;
  std::vector<GpuSample> latest_;
  std::thread thread_;
};

}  // namespace gearshift::monitor
