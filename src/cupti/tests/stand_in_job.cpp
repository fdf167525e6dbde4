// A stand-in CUDA job for the multi-process tests of `gearshift run` and `gearshift trace` (no GPU): it plays the
// driver for the injection library (loads $CUDA_INJECTION64_PATH and calls its InitializeInjection, as cuInit
// does) and the GPU through the fake CUPTI (fake_cupti.cpp), and it plays the launchers that start such jobs.
// Usage:
//   stand_in_job worker STEPS [KERNELS]  one CUDA process: STEPS steps of KERNELS kernels (default 4, named a, b,
//                                       c, d as the tests' plan) and a synchronize each; completions on the CUDA
//                                       device ordinal $STAND_IN_DEVICE (default 0)
//   stand_in_job launch CMD ARGS...     closes every descriptor above 2, then execs CMD (as torchrun and srun
//                                       start their workers)
//   stand_in_job spawn N CMD ARGS...    fork+exec CMD N times with RANK, LOCAL_RANK = i and WORLD_SIZE = N (with
//                                       STAND_IN_GPUS=1: CUDA_VISIBLE_DEVICES = i too); waits for all
//   stand_in_job fork N STEPS [KERNELS] N forked workers (no exec), ranked as spawn's
// Exit code: the worst of the workers'.
#include <dlfcn.h>
#include <signal.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include <cupti.h>

namespace {

using Init = int (*)();
using LaunchNamed = void (*)(uint32_t, uint32_t, const char*);
using AddKernelOn = void (*)(const char*, uint64_t, uint64_t, uint32_t, uint32_t);
using Sync = void (*)(uint32_t, int, int);

int worker(long steps, int kernels) {
  const char* inject = std::getenv("CUDA_INJECTION64_PATH");
  if (inject == nullptr) return 0;  // not traced: nothing to play
  void* lib = dlopen(inject, RTLD_NOW | RTLD_LOCAL);
  if (lib == nullptr) {
    std::fprintf(stderr, "stand_in_job: %s\n", dlerror());
    return 10;
  }
  auto init = reinterpret_cast<Init>(dlsym(lib, "InitializeInjection"));
  if (init == nullptr || init() != 1) return 11;
  const char* cupti = std::getenv("GEARSHIFT_CUPTI_LIBRARY");
  void* fake = cupti != nullptr ? dlopen(cupti, RTLD_NOW | RTLD_NOLOAD) : nullptr;
  if (fake == nullptr) return 0;  // the tracer did not start (its warning says why)
  auto launch = reinterpret_cast<LaunchNamed>(dlsym(fake, "fake_cupti_launch_named"));
  auto kernel = reinterpret_cast<AddKernelOn>(dlsym(fake, "fake_cupti_add_kernel_on"));
  auto sync = reinterpret_cast<Sync>(dlsym(fake, "fake_cupti_sync"));
  if (launch == nullptr || kernel == nullptr || sync == nullptr) return 12;
  const char* dev = std::getenv("STAND_IN_DEVICE");
  const auto device = static_cast<uint32_t>(dev != nullptr ? std::atoi(dev) : 0);
  static const char* const names[] = {"a", "b", "c", "d"};
  uint32_t corr = 0;
  uint64_t t = 10'000'000;
  for (long s = 0; s < steps; ++s) {
    for (int k = 0; k < kernels; ++k) {
      ++corr;
      launch(CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel, corr, names[k % 4]);
      kernel(names[k % 4], t, t + 5000, corr, device);
      t += 6000;
    }
    sync(++corr, 0, 0);
    timespec ts{0, 2'000'000};
    nanosleep(&ts, nullptr);
  }
  std::exit(0);  // through the library's exit handler, as a program ends
}

int wait_all(int n) {
  int worst = 0;
  for (int i = 0; i < n; ++i) {
    int st = 0;
    if (wait(&st) < 0) return 20;
    const int code = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
    if (code > worst) worst = code;
  }
  return worst;
}

void set_rank(int i, int n) {
  setenv("RANK", std::to_string(i).c_str(), 1);
  setenv("LOCAL_RANK", std::to_string(i).c_str(), 1);
  setenv("WORLD_SIZE", std::to_string(n).c_str(), 1);
  if (std::getenv("STAND_IN_GPUS") != nullptr) setenv("CUDA_VISIBLE_DEVICES", std::to_string(i).c_str(), 1);
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 3) return 2;
  const std::string mode = argv[1];
  if (mode == "worker") return worker(std::atol(argv[2]), argc > 3 ? std::atoi(argv[3]) : 4);
  if (mode == "launch") {
    for (int fd = 3; fd < 4096; ++fd) close(fd);
    execvp(argv[2], argv + 2);
    std::perror("stand_in_job launch");
    return 127;
  }
  const int n = std::atoi(argv[2]);
  if (mode == "spawn" && argc > 3) {
    for (int i = 0; i < n; ++i) {
      if (fork() == 0) {
        set_rank(i, n);
        execvp(argv[3], argv + 3);
        _exit(127);
      }
    }
    return wait_all(n);
  }
  if (mode == "fork" && argc > 3) {
    for (int i = 0; i < n; ++i) {
      if (fork() == 0) {
        set_rank(i, n);
        _exit(worker(std::atol(argv[3]), argc > 4 ? std::atoi(argv[4]) : 4));
      }
    }
    return wait_all(n);
  }
  return 2;
}
