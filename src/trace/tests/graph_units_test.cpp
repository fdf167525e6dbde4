// CUDA graph launches as units: inference of graph launches from shared correlations, the "g" record, the
// detector's step on a compiled job (graphs, a loss.item() copy every few steps) and the template's units.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <set>
#include <string>
#include <vector>

#include "trace/gearshift_format.hpp"
#include "trace/graph_units.hpp"
#include "trace/iteration.hpp"

namespace gearshift::trace {
namespace {

// A torch.compile(mode="reduce-overhead") step: forward and backward each one graph launch (all their ops carry
// the launch's correlation), eager loss and optimizer between; a DtoH copy every `item_every` steps.
struct CompiledJob {
  Trace t;
  std::int64_t now = 1'000'000, corr = 100;
  std::uint32_t name(const std::string& n) {
    auto it = std::find(t.names.begin(), t.names.end(), n);
    if (it != t.names.end()) return static_cast<std::uint32_t>(it - t.names.begin());
    t.names.push_back(n);
    return static_cast<std::uint32_t>(t.names.size() - 1);
  }
  void op(const std::string& n, std::int64_t dur, std::int64_t launch_corr, OpKind kind = OpKind::kernel) {
    OpRecord r;
    r.kind = kind;
    r.name_id = name(n);
    r.start_ns = now;
    r.duration_ns = dur;
    r.stream = 7;
    r.correlation = launch_corr;
    r.launch_ns = now - 50'000;
    t.ops.push_back(r);
    now += dur + 1'000;
  }
  void graph(const std::string& prefix, int kernels) {
    const std::int64_t c = corr++;
    for (int k = 0; k < kernels; ++k) op(prefix + "_triton_" + std::to_string(k % 7), 20'000 + 1'000 * (k % 5), c);
  }
  void step(bool item) {
    op("Memcpy HtoD (Pinned -> Device)", 3'000, corr++, OpKind::memcpy);
    graph("fwd", 40);
    op("loss_kernel", 30'000, corr++);
    graph("bwd", 90);
    for (int k = 0; k < 3; ++k) op("multi_tensor_apply_kernel<FusedAdamMathFunctor>", 90'000, corr++);
    if (item) op("Memcpy DtoH (Device -> Pinned)", 2'000, corr++, OpKind::memcpy);
    now += 300'000;
  }
};

TEST(GraphUnits, LaunchNamesRoundTrip) {
  EXPECT_EQ(graph_launch_name(17), "cudaGraphLaunch graph=17");
  EXPECT_EQ(graph_id_of_launch_name("cudaGraphLaunch graph=17"), 17u);
  EXPECT_FALSE(graph_id_of_launch_name("cudaGraphLaunch graph="));
  EXPECT_FALSE(graph_id_of_launch_name("cudaGraphLaunch graph=1x"));
  EXPECT_FALSE(graph_id_of_launch_name("gemm_kernel"));
}

TEST(GraphUnits, SharedCorrelationsAreGraphLaunchesNumberedBySequence) {
  CompiledJob j;
  for (int s = 0; s < 3; ++s) j.step(false);
  EXPECT_EQ(infer_graph_launches(j.t), 6u);  // 3 steps x (forward, backward)
  std::set<std::uint32_t> fwd, bwd, eager;
  for (const auto& r : j.t.ops) {
    const std::string& n = j.t.name_of(r);
    (n.starts_with("fwd") ? fwd : n.starts_with("bwd") ? bwd : eager).insert(r.graph_id);
  }
  EXPECT_EQ(fwd, (std::set<std::uint32_t>{1}));
  EXPECT_EQ(bwd, (std::set<std::uint32_t>{2}));
  EXPECT_EQ(eager, (std::set<std::uint32_t>{0}));
}

TEST(GraphUnits, GraphIdsSurviveTheFileAndOldFilesAreInferred) {
  CompiledJob j;
  for (int s = 0; s < 3; ++s) j.step(false);
  for (auto& r : j.t.ops)
    if (j.t.name_of(r).starts_with("fwd")) r.graph_id = 41;  // as the tracer saw it; bwd left unknown
  const std::string path = (std::filesystem::temp_directory_path() / "gearshift_graph_units.jsonl.gz").string();
  write_gearshift_trace(j.t, path);
  Trace back = read_gearshift_trace(path);
  std::filesystem::remove(path);
  std::set<std::uint32_t> fwd, bwd;
  for (const auto& r : back.ops) {
    const std::string& n = back.name_of(r);
    if (n.starts_with("fwd")) fwd.insert(r.graph_id);
    if (n.starts_with("bwd")) bwd.insert(r.graph_id);
  }
  EXPECT_EQ(fwd, (std::set<std::uint32_t>{41}));  // from the "g" records
  EXPECT_EQ(bwd, (std::set<std::uint32_t>{42}));  // inferred, numbered after the known ids
}

TEST(GraphUnits, TheStepIsOneOptimizerStepNotTheItemPeriod) {
  // loss.item() every 4 steps makes 4 steps match best; the optimizer says the step is one of them.
  CompiledJob j;
  for (int s = 0; s < 16; ++s) j.step(s % 4 == 3);
  infer_graph_launches(j.t);
  IterationAnalysis a = detect_iterations(j.t);
  EXPECT_EQ(a.tmpl.kernels, 40u + 1 + 90 + 3);
  EXPECT_EQ(a.evidence.optimizer_updates, 1u);
  EXPECT_GE(a.regular_count(), 12u);
  // Two graph launches per step, each a contiguous run of positions with one ordinal.
  std::set<std::int64_t> launches;
  for (const auto& op : a.tmpl.ops)
    if (op.graph_launch >= 0) launches.insert(op.graph_launch);
  EXPECT_EQ(launches, (std::set<std::int64_t>{0, 1}));
  std::vector<std::int64_t> g;
  for (const auto& op : a.tmpl.ops) g.push_back(op.graph_launch);
  const std::vector<bool> starts = unit_starts(g);
  std::size_t units = static_cast<std::size_t>(std::count(starts.begin(), starts.end(), true));
  EXPECT_EQ(units, a.tmpl.ops.size() - 40 - 90 + 2);
  // The step never starts inside a graph launch.
  EXPECT_TRUE(starts.front());
}

TEST(GraphUnits, UnitStartsExcludeEverythingInsideALaunch) {
  // Positions 1-3 one launch, with another stream's op (4) starting inside it, then launch 1 at 5-6.
  const std::vector<std::int64_t> g{-1, 0, 0, -1, 0, 1, 1, -1};
  EXPECT_EQ(unit_starts(g), (std::vector<bool>{true, true, false, false, false, true, false, true}));
}

}  // namespace
}  // namespace gearshift::trace
