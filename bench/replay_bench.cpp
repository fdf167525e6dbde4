// Speed of the runtime's replay (runtime::replay: what `gearshift replay` and `run --auto`'s in-time check run),
// CPU time on this machine, no GPU:
//   build/bench/replay_bench --benchmark_repetitions=3 --benchmark_report_aggregates_only=true
// BM_ReplayTiledMoe/N/LATE: the MoE excerpt (data/step_traces, 3 steps of ~4,650 kernels, a launch-bound job whose
// kernels start microseconds after their launch) tiled to N steps, each launch's CPU time recorded LATE µs late,
// replayed with a plan of its template at default clocks. `run --auto` replays 12 such steps per rung of its
// in-time check, on the launch times its feed recorded: late ones (a launch stamped after its kernel ended, as the
// stand-in job's lagging feed gave) made replay re-sort its pending completions at every such kernel.
#include <benchmark/benchmark.h>

#include <algorithm>
#include <cstdint>
#include <string>

#include "gpu/spec.hpp"
#include "runtime/replay.hpp"
#include "trace/gearshift_format.hpp"
#include "trace/iteration.hpp"

namespace {

using namespace gearshift;

// `t`'s ops and synchronizes repeated `copies` times, each copy shifted by the span of the original's steps and
// its correlations raised past the original's.
trace::Trace tiled(const trace::Trace& t, int copies, std::int64_t launch_late_ns) {
  const auto a = trace::detect_iterations(t);
  const std::int64_t span = a.iterations.back().end_ns - a.iterations.front().start_ns +
                            (a.iterations.size() > 1 ? a.iterations[1].start_ns - a.iterations[0].end_ns : 0);
  std::int64_t corr = 1;
  for (const auto& op : t.ops) corr = std::max(corr, op.correlation + 1);
  for (const auto& y : t.syncs) corr = std::max(corr, y.correlation + 1);
  trace::Trace out = t;
  out.ops.clear();
  out.syncs.clear();
  for (int c = 0; c < copies; ++c) {
    for (auto op : t.ops) {
      if (op.start_ns < a.iterations.front().start_ns || op.start_ns >= a.iterations.front().start_ns + span) continue;
      op.start_ns += c * span;
      if (op.launch_ns >= 0) op.launch_ns += c * span + launch_late_ns;
      if (op.correlation >= 0) op.correlation += c * corr;
      out.ops.push_back(op);
    }
    for (auto y : t.syncs) {
      y.enter_ns += c * span;
      if (y.correlation >= 0) y.correlation += c * corr;
      out.syncs.push_back(y);
    }
  }
  return out;
}

void BM_ReplayTiledMoe(benchmark::State& state) {
  const trace::Trace one =
      trace::import_trace(std::string(GEARSHIFT_DATA_DIR) + "/step_traces/moe_excerpt_3steps.trace.jsonl.gz");
  const trace::Trace t = tiled(one, static_cast<int>(state.range(0)) / 3, state.range(1) * 1000);
  const auto a = trace::detect_iterations(t);
  const gpu::GpuSpec spec = gpu::find_spec("h200");
  runtime::ClockPlan plan;
  plan.gpu = "h200";
  plan.period_ns = a.tmpl.period_ns;
  plan.switch_latency_ns = 6e6;
  plan.default_clocks = {spec.default_sm_clock_mhz, spec.max_mem_clock_mhz()};
  for (const auto& op : a.tmpl.ops)
    plan.positions.push_back({t.names[op.name_id], op.duration_ns, op.start_offset_ns, plan.default_clocks,
                              op.kind == trace::OpKind::kernel});
  plan = plan.kernels_only();
  runtime::ReplayOptions o;
  double prediction = 0;
  for (auto _ : state) {
    const runtime::ReplayResult r = runtime::replay(t, a, plan, o);
    prediction = r.prediction_accuracy;
    benchmark::DoNotOptimize(r);
  }
  state.counters["steps"] = static_cast<double>(a.iterations.size());
  state.counters["prediction_pct"] = 100 * prediction;
}

}  // namespace

BENCHMARK(BM_ReplayTiledMoe)
    ->Args({3, 0})
    ->Args({12, 0})
    ->Args({24, 0})
    ->Args({3, 2000})
    ->Args({12, 2000})
    ->Unit(benchmark::kMillisecond);

BENCHMARK_MAIN();
