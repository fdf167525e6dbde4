// The step replay against the traces' own measured steps (docs/model-validation.md, "Step replay"): for each
// trace, the template replayed at the traced clocks (every op at its traced mean duration, so the DVFS model
// plays no part) by the dependency-driven replay where the trace has launch events, and by the fallback rule;
// beside them the trace's measured step (its mean GPU span per step) and the meta s/step of an untraced run
// where given. Prints a Markdown table on stdout.
//   build/bench/replay_validation TRACE...
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <string>

#include <fmt/format.h>

#include "model/workload.hpp"
#include "plan/clock_table.hpp"
#include "graph/step_graph.hpp"
#include "trace/gearshift_format.hpp"
#include "trace/iteration.hpp"

using namespace gearshift;

namespace {

std::string pct(double sim, double ref) { return fmt::format("{:+.2f} %", (sim / ref - 1) * 100); }

}  // namespace

int main(int argc, char** argv) {
  std::puts("| trace | ops/step | positions with launch | syncs/step | measured s/step (GPU span) | meta s/step | dependency replay "
            "| error | fallback rule | error | within 2 % |");
  std::puts("|---|---|---|---|---|---|---|---|---|---|---|");
  int missed = 0;
  for (int k = 1; k < argc; ++k) {
    const std::string path = argv[k];
    std::string name = std::filesystem::path(path).filename().string();
    for (const char* ext : {".json.gz", ".jsonl.gz", ".trace"})
      if (auto p = name.find(ext); p != std::string::npos) name = name.substr(0, p);
    try {
      trace::Trace t = trace::import_trace(path);
      auto a = trace::detect_iterations(t);
      model::DvfsModel m(gpu::find_spec("h200"));
      model::Workload w = model::build_workload(t, a, m);
      std::vector<double> dur;
      for (const auto& op : w.ops) dur.push_back(op.ref_time_ns);
      double fallback_ns = 0;
      plan::op_starts_ns(w, dur, &fallback_ns);
      const double measured = w.period_ns;
      const graph::StepGraph g = graph::build_step_graph(w);
      std::string meta = t.measured.step_time_s ? fmt::format("{:.4f}", *t.measured.step_time_s) : "—";
      std::size_t with_launch = 0;
      for (const auto& op : w.ops) with_launch += op.launch_known;
      const std::string launches = with_launch ? fmt::format("{} of {}", with_launch, w.ops.size()) : "none";
      const std::string syncs = w.syncs_known ? std::to_string(w.syncs.size()) : (t.syncs_recorded ? "differ" : "not recorded");
      if (!g.dependency) {
        std::printf("| %s | %zu | %s | %s | %.4f | %s | — (%s) | | %.4f | %s | fallback only (no launch offsets) |\n",
                    name.c_str(), w.ops.size(), launches.c_str(), syncs.c_str(), measured * 1e-9, meta.c_str(),
                    g.note.c_str(), fallback_ns * 1e-9, pct(fallback_ns, measured).c_str());
        continue;
      }
      const graph::StepTiming r = graph::replay_fixed(g, dur);
      const bool ok = std::abs(r.step_ns / measured - 1) <= 0.02;
      missed += ok ? 0 : 1;
      std::printf("| %s | %zu | %s | %s | %.4f | %s | %.4f | %s | %.4f | %s | %s%s |\n", name.c_str(), w.ops.size(),
                  launches.c_str(), syncs.c_str(), measured * 1e-9, meta.c_str(), r.step_ns * 1e-9,
                  pct(r.step_ns, measured).c_str(), fallback_ns * 1e-9, pct(fallback_ns, measured).c_str(),
                  ok ? "yes" : "**no**", r.converged ? "" : " (not converged)");
    } catch (const std::exception& e) {
      std::string why = e.what();
      if (why.size() > 140) why = why.substr(0, 140) + "…";
      for (auto& c : why)
        if (c == '|' || c == '\n') c = ' ';
      std::printf("| %s | | | | | | no step: %s | | | | — |\n", name.c_str(), why.c_str());
    }
  }
  return missed == 0 ? 0 : 1;
}
