// Planner and importer speed on the shipped traces (CPU time on this machine; no GPU involved).
//   build/bench/plan_bench --benchmark_min_time=0.5
// BM_PlanJob/*: the whole `gearshift plan` computation on a trace, as plan_job does it (import, step detection,
// workload, calibration to the measured power, every strategy, the latency sweep, the frontier, the error bars of
// the phase plan at the spec's latency); BM_EvaluateAll/*
// the same after import and calibration. BM_PlanCommand/*: all that `gearshift plan TRACE --json` computes
// (service::run_plan_job: also the launch-bound what-if and the in-time replay), on the slowest shipped traces.
#include <benchmark/benchmark.h>

#include <filesystem>

#include "model/workload.hpp"
#include "plan/clock_table.hpp"
#include "plan/strategies.hpp"
#include "sim/evaluate.hpp"
#include "sim/measurement.hpp"
#include "service/plan_job.hpp"
#include "sim/saving_range.hpp"
#include "trace/gearshift_format.hpp"

namespace {

using namespace gearshift;

struct Setup {
  model::DvfsModel m{gpu::find_spec("h200")};
  model::Workload w;
  plan::ClockTable table;
  double budget = 0;
  Setup() {
    trace::Trace t = trace::import_trace(std::string(GEARSHIFT_DATA_DIR) + "/traces/gpt3xl_h200_trace.json.gz");
    auto a = trace::detect_iterations(t);
    w = model::build_workload(t, a, m);
    sim::calibrate_to_measured_power(w, m, *t.measured.average_power_w);
    table = plan::build_clock_table(w, m);
    double base_ns = sim::simulate(w, m, sim::default_schedule(w, m), 0).step_time_ns;
    budget = plan::total_time_ns(table, table.default_index) + 0.005 * base_ns;
  }
};

Setup& setup() {
  static Setup s;
  return s;
}

// The shipped MoE excerpt (5,385 positions x 220 clock pairs): the slowest plan of issue 48, its phase DP most
// of it.
struct MoeSetup {
  model::DvfsModel m{gpu::find_spec("h200")};
  model::Workload w;
  plan::ClockTable table;
  double budget = 0;
  MoeSetup() {
    trace::Trace t = trace::import_trace(std::string(GEARSHIFT_DATA_DIR) + "/step_traces/moe_excerpt_3steps.trace.jsonl.gz");
    auto a = trace::detect_iterations(t);
    w = model::build_workload(t, a, m);
    if (auto mp = sim::measured_power(t, a)) sim::calibrate_to_measured_power(w, m, mp->average_power_w);
    table = plan::build_clock_table(w, m);
    double base_ns = sim::simulate(w, m, sim::default_schedule(w, m), 0).step_time_ns;
    budget = plan::total_time_ns(table, table.default_index) + 0.005 * base_ns;
  }
};

MoeSetup& moe_setup() {
  static MoeSetup s;
  return s;
}

void BM_ClockTable(benchmark::State& st) {
  auto& s = setup();
  for (auto _ : st) benchmark::DoNotOptimize(plan::build_clock_table(s.w, s.m));
  st.SetLabel(std::to_string(s.w.ops.size()) + " ops x " + std::to_string(s.table.clocks.size()) + " clock pairs");
}
void BM_Iteration(benchmark::State& st) {
  auto& s = setup();
  for (auto _ : st) benchmark::DoNotOptimize(plan::plan_iteration(s.table, s.budget));
}
void BM_Pass(benchmark::State& st) {
  auto& s = setup();
  for (auto _ : st) benchmark::DoNotOptimize(plan::plan_pass(s.table, s.w, s.budget));
}
void BM_KernelLocal(benchmark::State& st) {
  auto& s = setup();
  for (auto _ : st) benchmark::DoNotOptimize(plan::plan_kernel_local(s.table, 0.005));
}
void BM_KernelGlobal(benchmark::State& st) {
  auto& s = setup();
  for (auto _ : st) benchmark::DoNotOptimize(plan::plan_kernel_global(s.table, s.budget));
}
void BM_Phase(benchmark::State& st) {
  auto& s = setup();
  const double latency_ns = static_cast<double>(st.range(0)) * 1e3;
  for (auto _ : st) benchmark::DoNotOptimize(plan::plan_phase(s.table, s.w, s.budget, latency_ns));
  st.SetLabel("L = " + std::to_string(st.range(0)) + " us");
}
void BM_PhaseMoe(benchmark::State& st) {
  auto& s = moe_setup();
  const double latency_ns = static_cast<double>(st.range(0)) * 1e3;
  for (auto _ : st) benchmark::DoNotOptimize(plan::plan_phase(s.table, s.w, s.budget, latency_ns));
  st.SetLabel("MoE excerpt, L = " + std::to_string(st.range(0)) + " us");
}
void BM_KernelGlobalMoe(benchmark::State& st) {
  auto& s = moe_setup();
  for (auto _ : st) benchmark::DoNotOptimize(plan::plan_kernel_global(s.table, s.budget));
  st.SetLabel("MoE excerpt, hulls included");
}
void BM_Simulate(benchmark::State& st) {
  auto& s = setup();
  auto sched = sim::default_schedule(s.w, s.m);
  for (auto _ : st) benchmark::DoNotOptimize(sim::simulate(s.w, s.m, sched, 6e6));
}
// One step of the dependency-driven replay (graph/step_graph.hpp) on 5,000 ops: two streams, every launch known,
// a CPU-bound gap and 4 synchronizes per step; the graph is built in each iteration (simulate() keeps it
// between calls on one template: this is the first call's cost).
model::Workload dependency_workload(const model::DvfsModel& m, std::size_t n) {
  model::Workload w;
  double at = 0;
  for (std::size_t i = 0; i < n; ++i) {
    model::WorkloadOp op;
    op.cls = i % 7 == 0 ? model::KernelClass::gemm : model::KernelClass::elementwise;
    op.coeffs = model::class_prior(op.cls);
    op.ref = m.default_reference(op.coeffs);
    op.ref_time_ns = 20e3 + static_cast<double>(i % 13) * 3e3;
    op.stream = i % 11 == 0 ? 9 : 7;
    if (i == n / 2) at += 2e6;  // the CPU prepares the next micro-batch: the GPU idles
    op.start_offset_ns = at;
    op.launch_offset_ns = at - 8e3;
    op.launch_known = true;
    if (op.stream == 7) at += op.ref_time_ns + 1.5e3;
    w.ops.push_back(op);
  }
  w.period_ns = at + 50e3;
  for (int k = 1; k <= 4; ++k) {
    trace::TemplateSync y;
    y.enter_offset_ns = at * k / 4.0 - 30e3;
    y.duration_ns = 35e3;
    w.syncs.push_back(y);
  }
  w.syncs_known = true;
  return w;
}
void BM_SimulateDependency(benchmark::State& st) {
  model::DvfsModel m{gpu::find_spec("h200")};
  const model::Workload w = dependency_workload(m, static_cast<std::size_t>(st.range(0)));
  auto sched = sim::default_schedule(w, m);
  for (std::size_t i = 0; i < w.ops.size(); i += 97) sched.clocks[i] = {1410, 3201};  // clock changes too
  sim::SimResult r;
  for (auto _ : st) benchmark::DoNotOptimize(r = sim::simulate(w, graph::build_step_graph(w), m, sched, 6e6));
  st.SetLabel(std::to_string(w.ops.size()) + " ops, dependency replay: " + (r.dependency_replay ? "yes" : "NO"));
}
void BM_StepGraph(benchmark::State& st) {
  model::DvfsModel m{gpu::find_spec("h200")};
  const model::Workload w = dependency_workload(m, static_cast<std::size_t>(st.range(0)));
  graph::StepGraph g;
  for (auto _ : st) benchmark::DoNotOptimize(g = graph::build_step_graph(w));
  auto sched = sim::default_schedule(w, m);
  for (std::size_t i = 0; i < w.ops.size(); i += 97) sched.clocks[i] = {1410, 3201};
  std::vector<double> d(w.ops.size(), 25e3);
  st.SetLabel("build only; steps replayed: " + std::to_string(graph::replay_fixed(g, d).steps));
}
// The error bars of `gearshift plan` (sim/saving_range.hpp): 200 draws, each conditioned on the measured power
// (3–17 baseline simulations) and 1 simulation of the phase plan.
void BM_SavingRange(benchmark::State& st) {
  auto& s = setup();
  const auto sched = plan::plan_phase(s.table, s.w, s.budget, 6e6);
  for (auto _ : st) benchmark::DoNotOptimize(sim::saving_range(s.w, s.m, sched, 6e6, 0.005));
  st.SetLabel("200 conditioned draws");
}
void BM_EvaluateAll(benchmark::State& st) {
  auto& s = setup();
  for (auto _ : st) benchmark::DoNotOptimize(sim::evaluate(s.w, s.m, {}));
  st.SetLabel("every strategy, L sweep, re-planning and simulation");
}

// What plan_job does with a trace file (service/plan_job.cpp: plan_trace), without the report.
struct Planned {
  model::DvfsModel m{gpu::find_spec("h200")};
  model::Workload w;
  sim::Evaluation ev;
  sim::SavingRange range;
};
Planned plan_job(const std::string& path, bool evaluate = true) {
  Planned p;
  trace::Trace t = trace::import_trace(path);
  auto a = trace::detect_iterations(t);
  p.w = model::build_workload(t, a, p.m);
  if (auto mp = sim::measured_power(t, a)) sim::calibrate_to_measured_power(p.w, p.m, mp->average_power_w);
  sim::EvaluateOptions o;
  if (evaluate) {
    p.ev = sim::evaluate(p.w, p.m, o);
    // The error bars of the plan written to -o: phase at the spec's switch latency (6 ms on the H200).
    const double l = p.m.spec().switch_latency_ns;
    for (const auto& s : p.ev.strategies)
      if (s.schedule.strategy == plan::Strategy::phase && s.switch_latency_ns == l)
        p.range = sim::saving_range(p.w, p.m, s.schedule, l, o.max_slowdown);
  }
  return p;
}

std::string trace_path(const std::string& rel) {
  return rel.rfind("data/", 0) == 0 ? std::string(GEARSHIFT_SHARED_DIR) + "/" + rel : rel;
}

void BM_PlanJob(benchmark::State& st, const std::string& rel) {
  const std::string path = trace_path(rel);
  if (!std::filesystem::exists(path)) {
    st.SkipWithError("../shared absent");
    return;
  }
  std::size_t ops = 0;
  for (auto _ : st) {
    Planned p = plan_job(path);
    ops = p.w.ops.size();
    benchmark::DoNotOptimize(p.ev);
  }
  st.SetLabel(std::to_string(ops) + " ops: import, steps, calibration, every strategy, L sweep, frontier, range");
}

void BM_EvaluateTrace(benchmark::State& st, const std::string& rel) {
  const std::string path = trace_path(rel);
  if (!std::filesystem::exists(path)) {
    st.SkipWithError("../shared absent");
    return;
  }
  Planned p = plan_job(path, false);
  for (auto _ : st) benchmark::DoNotOptimize(sim::evaluate(p.w, p.m, {}));
  st.SetLabel(std::to_string(p.w.ops.size()) + " ops: every strategy, L sweep, frontier");
}

void BM_PlanCommand(benchmark::State& st, const std::string& path) {
  service::PlanJobOptions o;
  o.trace_path = path;
  o.display_name = path;
  for (auto _ : st) benchmark::DoNotOptimize(service::run_plan_job(o));
  st.SetLabel("gearshift plan --json's computation, whole");
}

void BM_Import(benchmark::State& st, const std::string& rel) {
  std::string path = std::string(GEARSHIFT_SHARED_DIR) + "/" + rel;
  if (!std::filesystem::exists(path)) {
    st.SkipWithError("../shared absent");
    return;
  }
  std::size_t ops = 0;
  for (auto _ : st) {
    auto t = trace::import_trace(path);
    auto a = trace::detect_iterations(t);
    ops = t.ops.size();
    benchmark::DoNotOptimize(a);
  }
  st.SetLabel(std::to_string(ops) + " ops, import + iteration detection");
}

BENCHMARK(BM_ClockTable)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_Iteration)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_Pass)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_KernelLocal)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_KernelGlobal)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_Phase)->Arg(10)->Arg(100)->Arg(1000)->Arg(6000)->Arg(20000)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_PhaseMoe)->Arg(100)->Arg(6000)->Arg(100000)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_KernelGlobalMoe)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_Simulate)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_SimulateDependency)->Arg(5000)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_StepGraph)->Arg(5000)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_SavingRange)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_EvaluateAll)->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_EvaluateTrace, ddp2_rank0, std::string("data/traces/ddp2_gpt2m_rank0_h200_trace.json.gz"))->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_PlanJob, gpt3xl, std::string(GEARSHIFT_DATA_DIR) + "/traces/gpt3xl_h200_trace.json.gz")->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_PlanJob, accum4_gpt2s, std::string(GEARSHIFT_DATA_DIR) + "/step_traces/accum4_gpt2s.json.gz")->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_PlanJob, ddp2_rank0, std::string("data/traces/ddp2_gpt2m_rank0_h200_trace.json.gz"))->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_PlanCommand, moe_excerpt, std::string(GEARSHIFT_DATA_DIR) + "/step_traces/moe_excerpt_3steps.trace.jsonl.gz")->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_PlanCommand, megatron_excerpt, std::string(GEARSHIFT_DATA_DIR) + "/step_traces/megatron_excerpt_3steps.trace.jsonl.gz")->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_Import, gpt3xl, std::string("data/traces/gpt3xl_h200_trace.json.gz"))->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_Import, gpt2, std::string("data/traces/gpt2_h200_trace.json.gz"))->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_Import, ddp2_rank0, std::string("data/traces/ddp2_gpt2m_rank0_h200_trace.json.gz"))->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_Import, ddp2_rank1, std::string("data/traces/ddp2_gpt2m_rank1_h200_trace.json.gz"))->Unit(benchmark::kMillisecond);

}  // namespace

BENCHMARK_MAIN();
