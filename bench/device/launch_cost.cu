// Cost of one kernel launch, with and without gearshift's injection library, on both sides:
//  - CPU: an empty kernel launched in batches of 256 (few enough that the launch queue never fills and
//    blocks); only the launch loop is timed; median per-launch time over the batches.
//  - GPU: 256 empty kernels queued behind a 2 ms spin kernel (so the CPU's launch rate cannot starve the GPU),
//    timed with CUDA events around them; median per-kernel GPU time over the batches. Tracing instrumentation
//    that adds GPU work per kernel (activity timestamps) shows up here.
// With a second argument "marker", every launch is followed by what a gearshift stream marker costs
// (cupti/marker_issuer.cpp: cuStreamIsCapturing + cuStreamWriteValue64 into a pinned host word), so that the
// difference to a plain run is the marker's own cost, CPU and GPU (the library issues one every 5 ms at most).
// Prints one JSON line. Build: nvcc -O2 -o launch_cost launch_cost.cu -lcuda
#include <cuda.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

__global__ void empty_kernel() {}

__global__ void spin_kernel(long long cycles) {
  const long long t0 = clock64();
  while (clock64() - t0 < cycles) {
  }
}

static CUdeviceptr g_word = 0;
static unsigned long long g_seq = 0;

// One stream marker on the legacy default stream, as the injection library issues it.
static void marker() {
  CUstreamCaptureStatus st;
  cuStreamIsCapturing(nullptr, &st);
  cuStreamWriteValue64(nullptr, g_word, ++g_seq, CU_STREAM_WRITE_VALUE_DEFAULT);
}

static double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

int main(int argc, char** argv) {
  const int batches = argc > 1 ? std::atoi(argv[1]) : 2000;
  const bool markers = argc > 2 && std::string(argv[2]) == "marker";
  constexpr int kBatch = 256;
  if (cudaFree(nullptr) != cudaSuccess) {
    std::fprintf(stderr, "launch_cost: no CUDA device\n");
    return 2;
  }
  void* host = nullptr;
  if (markers) {
    if (cuMemHostAlloc(&host, 64, CU_MEMHOSTALLOC_PORTABLE | CU_MEMHOSTALLOC_DEVICEMAP) != CUDA_SUCCESS ||
        cuMemHostGetDevicePointer(&g_word, host, 0) != CUDA_SUCCESS) {
      std::fprintf(stderr, "launch_cost: no pinned mapped word\n");
      return 2;
    }
  }
  auto launch = [&] {
    empty_kernel<<<1, 1>>>();
    if (markers) marker();
  };
  for (int i = 0; i < 4 * kBatch; ++i) launch();
  cudaDeviceSynchronize();
  std::vector<double> cpu_ns;
  cpu_ns.reserve(batches);
  for (int b = 0; b < batches; ++b) {
    auto t0 = std::chrono::steady_clock::now();
    for (int i = 0; i < kBatch; ++i) launch();
    auto t1 = std::chrono::steady_clock::now();
    cpu_ns.push_back(std::chrono::duration<double, std::nano>(t1 - t0).count() / kBatch);
    cudaDeviceSynchronize();
  }
  // ~2 ms at the H200's boost clock (1.98 GHz); only needs to outlast launching one batch (~1.5 ms traced).
  const long long spin_cycles = 4'000'000;
  cudaEvent_t e0, e1;
  cudaEventCreate(&e0);
  cudaEventCreate(&e1);
  std::vector<double> gpu_ns;
  const int gpu_batches = std::max(1, batches / 10);
  for (int b = 0; b < gpu_batches; ++b) {
    spin_kernel<<<1, 1>>>(spin_cycles);
    cudaEventRecord(e0);
    for (int i = 0; i < kBatch; ++i) launch();
    cudaEventRecord(e1);
    cudaEventSynchronize(e1);
    float ms = 0;
    cudaEventElapsedTime(&ms, e0, e1);
    gpu_ns.push_back(1e6 * ms / kBatch);
  }
  if (cudaGetLastError() != cudaSuccess) return 1;
  if (markers && *static_cast<volatile unsigned long long*>(host) != g_seq) {
    std::fprintf(stderr, "launch_cost: the marker word holds %llu, not %llu\n",
                 *static_cast<volatile unsigned long long*>(host), g_seq);
    return 1;
  }
  std::sort(cpu_ns.begin(), cpu_ns.end());
  std::printf("{\"marker_per_launch\": %s, \"launches\": %d, \"median_ns_per_launch\": %.1f, \"p10_ns\": %.1f, \"p90_ns\": %.1f, "
              "\"gpu_median_ns_per_kernel\": %.1f}\n",
              markers ? "true" : "false", batches * kBatch, cpu_ns[cpu_ns.size() / 2], cpu_ns[cpu_ns.size() / 10], cpu_ns[cpu_ns.size() * 9 / 10],
              median(gpu_ns));
  return 0;
}
