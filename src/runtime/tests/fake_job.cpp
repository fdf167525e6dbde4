// A stand-in training job for `gearshift run` tests (no CUDA): it launches the plan's template step after step
// through the GEARSHIFT_RUNTIME_FD feed, with the GPU simulated by the plan's durations.
// Usage: runtime_fake_job PLAN STEPS [PIDFILE]   (STEPS < 0: until the feed closes)
#include <signal.h>
#include <time.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <string>

#include "runtime/clock_plan.hpp"
#include "runtime/live.hpp"

namespace {
bool put(int fd, const std::string& s) {
  std::size_t off = 0;
  while (off < s.size()) {
    ssize_t n = write(fd, s.data() + off, s.size() - off);
    if (n <= 0) return false;
    off += static_cast<std::size_t>(n);
  }
  return true;
}
void sleep_until(std::int64_t t) {
  for (std::int64_t now; (now = gearshift::runtime::monotonic_ns()) < t;) {
    timespec ts{static_cast<time_t>((t - now) / 1'000'000'000), static_cast<long>((t - now) % 1'000'000'000)};
    nanosleep(&ts, nullptr);
  }
}
}  // namespace

int main(int argc, char** argv) {
  if (argc < 3) return 2;
  signal(SIGPIPE, SIG_IGN);
  const char* fdenv = std::getenv("GEARSHIFT_RUNTIME_FD");
  if (!fdenv) return 3;
  const int fd = std::atoi(fdenv);
  if (argc > 3) {
    FILE* f = std::fopen(argv[3], "w");
    if (!f) return 4;
    std::fprintf(f, "%d\n", static_cast<int>(getpid()));
    std::fclose(f);
  }
  auto plan = gearshift::runtime::load_plan(argv[1]);
  const long steps = std::atol(argv[2]);
  std::int64_t corr = 0;
  for (long s = 0; steps < 0 || s < steps; ++s) {
    const std::int64_t t0 = gearshift::runtime::monotonic_ns();
    const std::int64_t first = corr;
    for (const auto& p : plan.positions)  // the CPU launches the whole step ahead of the GPU
      if (!put(fd, "L " + std::to_string(gearshift::runtime::monotonic_ns()) + " " + std::to_string(corr++) + " " + p.name + "\n")) return 0;
    for (std::size_t i = 0; i < plan.positions.size(); ++i) {
      const auto& p = plan.positions[i];
      const auto start = t0 + static_cast<std::int64_t>(p.start_offset_ns);
      const auto end = start + static_cast<std::int64_t>(p.duration_ns);
      sleep_until(end);
      if (!put(fd, "C " + std::to_string(first + static_cast<std::int64_t>(i)) + " " + std::to_string(start) + " " + std::to_string(end) + "\n")) return 0;
    }
    sleep_until(t0 + static_cast<std::int64_t>(plan.period_ns));
  }
  return 0;
}
