// CPU cost of one kernel launch over time: whether a cost that CUPTI added while kernel activity was on stays
// after it is turned off (the injection library's sampled activity, GEARSHIFT_FEED_ACTIVITY_PERIOD_MS/WINDOW_MS,
// turns it on and off from its controller thread). Launches an empty kernel in batches of 256 for SECONDS
// seconds (synchronizing after each batch, so that the launch queue never fills) and prints one JSON line: the
// median CPU ns per launch in each second.
// Usage: launch_cost_phases [SECONDS]   Build: nvcc -O2 -o launch_cost_phases launch_cost_phases.cu
#include <cuda_runtime.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <vector>

__global__ void empty_kernel() {}

int main(int argc, char** argv) {
  const int seconds = argc > 1 ? std::atoi(argv[1]) : 12;
  constexpr int kBatch = 256;
  if (cudaFree(nullptr) != cudaSuccess) {
    std::fprintf(stderr, "launch_cost_phases: no CUDA device\n");
    return 2;
  }
  using clock = std::chrono::steady_clock;
  const auto start = clock::now();
  std::vector<std::vector<double>> per_second(seconds);
  for (;;) {
    const auto t0 = clock::now();
    const int sec = static_cast<int>(std::chrono::duration<double>(t0 - start).count());
    if (sec >= seconds) break;
    for (int i = 0; i < kBatch; ++i) empty_kernel<<<1, 1>>>();
    const auto t1 = clock::now();
    per_second[sec].push_back(std::chrono::duration<double, std::nano>(t1 - t0).count() / kBatch);
    cudaDeviceSynchronize();
  }
  if (cudaGetLastError() != cudaSuccess) return 1;
  std::printf("{\"median_ns_per_launch_by_second\": [");
  for (int s = 0; s < seconds; ++s) {
    auto& v = per_second[s];
    std::sort(v.begin(), v.end());
    std::printf("%s%.0f", s ? ", " : "", v.empty() ? 0.0 : v[v.size() / 2]);
  }
  std::printf("]}\n");
  return 0;
}
