#include "runtime/clock_plan.hpp"

#include <algorithm>
#include <map>

#include "gpu/spec.hpp"
#include "trace/graph_units.hpp"

namespace gearshift::runtime {

std::vector<std::size_t> ClockPlan::change_positions() const {
  std::vector<std::size_t> out;
  const std::size_t n = positions.size();
  for (std::size_t p = 0; p < n; ++p)
    if (!(positions[p].clocks == positions[(p + n - 1) % n].clocks)) out.push_back(p);
  return out;
}

ClockPlan ClockPlan::kernels_only() const {
  ClockPlan p = *this;
  p.positions.clear();
  for (const auto& x : positions)
    if (x.kernel) p.positions.push_back(x);
  if (p.positions.empty()) p.positions = positions;
  return p;
}

ClockPlan clock_plan_from(const plan::PlanFile& f) {
  ClockPlan p;
  p.gpu = f.gpu;
  p.period_ns = f.period_us * 1e3;
  p.switch_latency_ns = f.switch_latency_us * 1e3;
  std::map<std::int64_t, std::size_t> unit_of;  // graph launch -> its position in p
  for (const auto& x : f.positions) {
    const double start = x.start_offset_us * 1e3, end = start + x.duration_us * 1e3;
    if (x.graph_launch >= 0) {
      auto it = unit_of.find(x.graph_launch);
      if (it != unit_of.end()) {
        PlanPosition& u = p.positions[it->second];
        u.duration_ns = std::max(u.duration_ns, end - u.start_offset_ns);
        ++u.ops;
        continue;
      }
      unit_of.emplace(x.graph_launch, p.positions.size());
      p.positions.push_back({trace::graph_launch_name(x.graph_id), x.duration_us * 1e3, start, x.clocks, true});
      continue;
    }
    p.positions.push_back({x.name, x.duration_us * 1e3, start, x.clocks, x.kind == trace::OpKind::kernel});
  }
  const gpu::GpuSpec s = gpu::find_spec(f.gpu);  // a validated plan's GPU has a spec
  p.default_clocks = {s.default_sm_clock_mhz, s.max_mem_clock_mhz()};
  return p;
}

ClockPlan plan_from_json(const nlohmann::json& j, const std::string& source) {
  return clock_plan_from(plan::plan_file_from_json(j, source));
}

ClockPlan load_plan(const std::string& path) { return clock_plan_from(plan::read_plan_file(path)); }

}  // namespace gearshift::runtime
