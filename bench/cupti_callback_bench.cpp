// Cost of the CUPTI launch-callback handler (the hot path the runtime reuses), on synthetic callback data:
// what CUPTI's trampoline calls for every cuLaunchKernel* / cuGraphLaunch, at API entry and exit.
#include <benchmark/benchmark.h>

#include <cupti.h>

#include <fcntl.h>
#include <time.h>

#include <atomic>
#include <chrono>
#include <thread>

#include "cupti/callback_handler.hpp"
#include "cupti/launch_queue.hpp"
#include "cupti/launch_table.hpp"
#include "cupti/runtime_feed.hpp"

namespace {

gearshift::cupti::LaunchTable& table() {
  static gearshift::cupti::LaunchTable t;
  return t;
}

// One launch = the entry callback (records) + the exit callback (returns at once), as CUPTI delivers them.
void BM_LaunchCallbackEnterExit(benchmark::State& state) {
  CUpti_CallbackData enter{};
  enter.callbackSite = CUPTI_API_ENTER;
  CUpti_CallbackData exit_data{};
  exit_data.callbackSite = CUPTI_API_EXIT;
  std::uint32_t corr = static_cast<std::uint32_t>(state.thread_index()) << 24;
  for (auto _ : state) {
    enter.correlationId = ++corr;
    gearshift::cupti::on_driver_api(table(), CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel, &enter);
    exit_data.correlationId = corr;
    gearshift::cupti::on_driver_api(table(), CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel, &exit_data);
    benchmark::ClobberMemory();
  }
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_LaunchCallbackEnterExit);
// PyTorch launches from its main thread and its autograd thread: two launching threads at once.
BENCHMARK(BM_LaunchCallbackEnterExit)->Threads(2);

// The hot path as `gearshift run` uses it: the entry callback also reads the clock (CLOCK_MONOTONIC here, a
// stand-in for cuptiGetTimestamp, measured separately on the GPU machine) and hands the launch to the runtime
// feed's queue, which a writer thread drains meanwhile (as the injection library's feed thread does).
void BM_LaunchCallbackWithFeed(benchmark::State& state) {
  static gearshift::cupti::LaunchQueue queue;
  static std::atomic<int> running{0};
  static std::thread drainer;
  if (state.thread_index() == 0) {
    running.store(1);
    drainer = std::thread([] {
      gearshift::cupti::LaunchEvent e;
      while (running.load(std::memory_order_relaxed) != 0) {  // drains every 500 µs, as the feed's writer
        while (queue.pop(e)) {
        }
        std::this_thread::sleep_for(std::chrono::microseconds(500));
      }
    });
  }
  auto now = [] {
    timespec ts{};
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return static_cast<std::int64_t>(ts.tv_sec) * 1'000'000'000 + ts.tv_nsec;
  };
  CUpti_CallbackData enter{};
  enter.callbackSite = CUPTI_API_ENTER;
  enter.symbolName = "_Z4geluPf";
  CUpti_CallbackData exit_data{};
  exit_data.callbackSite = CUPTI_API_EXIT;
  std::uint32_t corr = static_cast<std::uint32_t>(state.thread_index()) << 24;
  gearshift::cupti::LaunchEvent e;
  for (auto _ : state) {
    enter.correlationId = ++corr;
    if (gearshift::cupti::on_driver_api(table(), CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel, &enter, now, e))
      queue.push(e);
    exit_data.correlationId = corr;
    gearshift::cupti::on_driver_api(table(), CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel, &exit_data, now, e);
    benchmark::ClobberMemory();
  }
  state.SetItemsProcessed(state.iterations());
  if (state.thread_index() == 0) {
    running.store(0);
    drainer.join();
    state.counters["dropped"] = static_cast<double>(queue.dropped());
  }
}
BENCHMARK(BM_LaunchCallbackWithFeed);
BENCHMARK(BM_LaunchCallbackWithFeed)->Threads(2);

void BM_LaunchTableLookup(benchmark::State& state) {
  for (std::uint32_t i = 1; i <= 1024; ++i) table().record(i, gearshift::cupti::LaunchApi::kernel);
  std::uint32_t corr = 0;
  for (auto _ : state) {
    benchmark::DoNotOptimize(table().lookup((corr++ & 1023) + 1));
  }
}
BENCHMARK(BM_LaunchTableLookup);

// What a copy or memset costs CUPTI's buffer thread (not the launch path) since the feed sends them (Y lines,
// session 25): one RuntimeFeed::on_copy_complete per activity record, while the feed's writer thread formats and
// writes the batches to /dev/null every 500 µs. CUPTI's own cost of recording the copy needs a GPU.
void BM_CopyCompleteToFeed(benchmark::State& state) {
  const int fd = open("/dev/null", O_WRONLY | O_CLOEXEC);
  if (fd < 0) {
    state.SkipWithError("cannot open /dev/null");
    return;
  }
  auto now = [] {
    timespec ts{};
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return static_cast<std::int64_t>(ts.tv_sec) * 1'000'000'000 + ts.tv_nsec;
  };
  gearshift::cupti::RuntimeFeed feed(fd, now);  // owns fd: closed by stop()
  const char* labels[] = {"Memcpy DtoD (Device -> Device)", "Memset (Device)", "Memcpy HtoD (Pinned -> Device)"};
  std::uint32_t corr = 0;
  std::int64_t t = 1'000'000'000;
  for (auto _ : state) {
    ++corr;
    feed.on_copy_complete(corr, t, t + 2000, 7, 0, 1 << 20, corr % 3 == 1, labels[corr % 3]);
    t += 3000;
  }
  feed.stop();
  state.SetItemsProcessed(state.iterations());
  state.counters["lines_written"] = static_cast<double>(feed.stats().copies);
}
BENCHMARK(BM_CopyCompleteToFeed);

}  // namespace

BENCHMARK_MAIN();
