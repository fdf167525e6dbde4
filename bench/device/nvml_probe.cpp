// Independent NVML reader for the device checks (bench/device/monitor_check.sh); reads only, never sets.
//   nvml_probe log FILE PERIOD_MS   log "t_start_ns,t_end_ns,energy_mj" (steady clock) every PERIOD_MS until
//                                   SIGTERM/SIGINT: a second process reading the counter beside `gearshift monitor`
//   nvml_probe cost N               wall and CPU time per call of each read the sampler makes (N calls each)
#include <signal.h>
#include <time.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <string>
#include <thread>

#include "gpu/nvml.hpp"

namespace {
std::atomic<bool> g_stop{false};
void on_signal(int) { g_stop = true; }

long long mono_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch())
      .count();
}
double cpu_s() {
  timespec ts{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) * 1e-9;
}
}  // namespace

int main(int argc, char** argv) {
  if (argc < 3) {
    std::fprintf(stderr, "usage: nvml_probe log FILE PERIOD_MS | nvml_probe cost N\n");
    return 2;
  }
  auto nvml = gearshift::gpu::Nvml::open();
  if (!nvml) {
    std::fprintf(stderr, "nvml_probe: %s\n", nvml.error().what().c_str());
    return 5;
  }
  auto dev = nvml.value()->device(0);
  if (!dev) {
    std::fprintf(stderr, "nvml_probe: %s\n", dev.error().what().c_str());
    return 5;
  }
  const auto& d = dev.value();
  std::string mode = argv[1];
  if (mode == "log" && argc >= 4) {
    signal(SIGTERM, on_signal);
    signal(SIGINT, on_signal);
    std::FILE* f = std::fopen(argv[2], "w");
    if (!f) return 3;
    auto period = std::chrono::milliseconds(std::atoi(argv[3]));
    std::fprintf(f, "t_start_ns,t_end_ns,energy_mj\n");
    auto next = std::chrono::steady_clock::now();
    while (!g_stop) {
      long long a = mono_ns();
      auto e = d.total_energy_mj();
      long long b = mono_ns();
      if (e) std::fprintf(f, "%lld,%lld,%llu\n", a, b, static_cast<unsigned long long>(e.value()));
      next += period;
      std::this_thread::sleep_until(next);
    }
    std::fclose(f);
    return 0;
  }
  if (mode == "cost") {
    int n = std::atoi(argv[2]);
    auto time = [&](const char* name, const std::function<bool()>& call) {
      double c0 = cpu_s();
      long long w0 = mono_ns();
      int ok = 0;
      for (int i = 0; i < n; ++i) ok += call();
      double wall_ms = static_cast<double>(mono_ns() - w0) * 1e-6 / n;
      double cpu_ms = (cpu_s() - c0) * 1e3 / n;
      std::printf("{\"call\":\"%s\",\"n\":%d,\"ok\":%d,\"wall_ms\":%.4f,\"cpu_ms\":%.4f}\n", name, n, ok, wall_ms, cpu_ms);
    };
    time("total_energy", [&] { return d.total_energy_mj().ok(); });
    time("instant_power", [&] { return d.instant_power_w().ok(); });
    time("average_power", [&] { return d.average_power_w().ok(); });
    time("sm_clock", [&] { return d.sm_clock_mhz().ok(); });
    time("mem_clock", [&] { return d.mem_clock_mhz().ok(); });
    time("temperature", [&] { return d.temperature_c().ok(); });
    time("clock_event_reasons", [&] { return d.clock_event_reasons().ok(); });
    // Counter update period: read back to back and note the times at which the value changes.
    long long last_change = 0;
    unsigned long long last = 0;
    int changes = 0;
    std::printf("{\"counter_steps_ms\":[");
    long long end = mono_ns() + 2'000'000'000LL;
    while (mono_ns() < end) {
      auto e = d.total_energy_mj();
      long long t = mono_ns();
      if (!e) break;
      if (e.value() != last) {
        if (last_change && changes > 0) std::printf("%s%.1f", changes > 1 ? "," : "", static_cast<double>(t - last_change) * 1e-6);
        last_change = t;
        last = e.value();
        ++changes;
      }
    }
    std::printf("]}\n");
    return 0;
  }
  return 2;
}
