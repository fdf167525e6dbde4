// Cost of the CUPTI launch-callback handler (the hot path the runtime reuses), on synthetic callback data:
// what CUPTI's trampoline calls for every cuLaunchKernel* / cuGraphLaunch, at API entry and exit.
#include <benchmark/benchmark.h>

#include <cupti.h>

#include "cupti/callback_handler.hpp"
#include "cupti/launch_table.hpp"

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

void BM_LaunchTableLookup(benchmark::State& state) {
  for (std::uint32_t i = 1; i <= 1024; ++i) table().record(i, gearshift::cupti::LaunchApi::kernel);
  std::uint32_t corr = 0;
  for (auto _ : state) {
    benchmark::DoNotOptimize(table().lookup((corr++ & 1023) + 1));
  }
}
BENCHMARK(BM_LaunchTableLookup);

}  // namespace

BENCHMARK_MAIN();
