// CPU cost of one kernel launch, with and without gearshift's injection library: launches an empty kernel in
// batches of 256 (few enough that the launch queue never fills and blocks), times only the launch loop, and
// prints the median per-launch time over the batches as one JSON line. Build: nvcc -O2 -o launch_cost launch_cost.cu
#include <cuda_runtime.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <vector>

__global__ void empty_kernel() {}

int main(int argc, char** argv) {
  const int batches = argc > 1 ? std::atoi(argv[1]) : 2000;
  constexpr int kBatch = 256;
  if (cudaFree(nullptr) != cudaSuccess) {
    std::fprintf(stderr, "launch_cost: no CUDA device\n");
    return 2;
  }
  for (int i = 0; i < 4 * kBatch; ++i) empty_kernel<<<1, 1>>>();
  cudaDeviceSynchronize();
  std::vector<double> per_launch_ns;
  per_launch_ns.reserve(batches);
  for (int b = 0; b < batches; ++b) {
    auto t0 = std::chrono::steady_clock::now();
    for (int i = 0; i < kBatch; ++i) empty_kernel<<<1, 1>>>();
    auto t1 = std::chrono::steady_clock::now();
    per_launch_ns.push_back(std::chrono::duration<double, std::nano>(t1 - t0).count() / kBatch);
    cudaDeviceSynchronize();
  }
  if (cudaGetLastError() != cudaSuccess) return 1;
  std::sort(per_launch_ns.begin(), per_launch_ns.end());
  std::printf("{\"launches\": %d, \"median_ns_per_launch\": %.1f, \"p10_ns\": %.1f, \"p90_ns\": %.1f}\n",
              batches * kBatch, per_launch_ns[per_launch_ns.size() / 2], per_launch_ns[per_launch_ns.size() / 10],
              per_launch_ns[per_launch_ns.size() * 9 / 10]);
  return 0;
}
