#include "runtime/clock_plan.hpp"

#include <algorithm>
#include <map>

#include "gpu/spec.hpp"
#include "trace/graph_units.hpp"

namespace gearshift::runtime {

namespace {
// `vs` over positions renumbered by `index` (old position -> new one, -1: dropped; several old positions may
// become one, a graph launch). A skip counts the new positions its old ones became; a variant left empty is
// dropped.
std::vector<PlanVariant> renumbered(const std::vector<PlanVariant>& vs, const std::vector<std::int64_t>& index,
                                    bool kernels_only) {
  std::vector<PlanVariant> out;
  for (const auto& v : vs) {
    PlanVariant w;
    for (std::int64_t i = v.after; i >= 0 && w.after < 0; --i) w.after = index[static_cast<std::size_t>(i)];
    for (const auto& op : v.ops)
      if (op.second || !kernels_only) w.ops.push_back(op);
    std::int64_t last = w.after;
    for (std::size_t i = static_cast<std::size_t>(v.after + 1); i <= static_cast<std::size_t>(v.after) + v.skip; ++i)
      if (const std::int64_t k = index[i]; k > last) ++w.skip, last = k;
    if (!w.ops.empty() || w.skip > 0) out.push_back(std::move(w));
  }
  return out;
}
}  // namespace

std::vector<std::size_t> ClockPlan::change_positions() const {
  std::vector<std::size_t> out;
  const std::size_t n = positions.size();
  for (std::size_t p = 0; p < n; ++p)
    if (!(positions[p].clocks == positions[(p + n - 1) % n].clocks)) out.push_back(p);
  return out;
}

std::optional<model::ClockPair> ClockPlan::one_pair() const {
  if (positions.empty() || !change_positions().empty()) return std::nullopt;
  return positions.front().clocks;
}

double ClockPlan::kernel_ns_per_step() const {
  double ns = 0;
  for (const auto& p : positions) ns += p.duration_ns;
  return ns;
}

ClockPlan ClockPlan::kernels_only() const {
  ClockPlan p = *this;
  p.positions.clear();
  std::vector<std::int64_t> index;
  for (const auto& x : positions) {
    index.push_back(x.kernel ? static_cast<std::int64_t>(p.positions.size()) : -1);
    if (x.kernel) p.positions.push_back(x);
  }
  if (p.positions.empty()) return *this;
  p.variants = renumbered(variants, index, true);
  return p;
}

ClockPlan clock_plan_from(const plan::PlanFile& f) {
  ClockPlan p;
  p.gpu = f.gpu;
  p.period_ns = f.period_us * 1e3;
  p.switch_latency_ns = f.switch_latency_us * 1e3;
  std::map<std::int64_t, std::size_t> unit_of;  // graph launch -> its position in p
  std::vector<std::int64_t> index;               // file position -> its position in p
  for (const auto& x : f.positions) {
    index.push_back(static_cast<std::int64_t>(x.graph_launch >= 0 && unit_of.count(x.graph_launch)
                                                  ? unit_of[x.graph_launch] : p.positions.size()));
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
      if (x.launch_offset_us) p.positions.back().launch_offset_ns = *x.launch_offset_us * 1e3;
      continue;
    }
    p.positions.push_back({x.name, x.duration_us * 1e3, start, x.clocks, x.kind == trace::OpKind::kernel});
    if (x.launch_offset_us) p.positions.back().launch_offset_ns = *x.launch_offset_us * 1e3;
  }
  std::vector<PlanVariant> vs;
  for (const auto& v : f.variants) {
    PlanVariant w{v.after, {}, v.skip};
    for (const auto& [name, kind] : v.ops) w.ops.emplace_back(name, kind == trace::OpKind::kernel);
    vs.push_back(std::move(w));
  }
  p.variants = renumbered(vs, index, false);
  const gpu::GpuSpec s = gpu::find_spec(f.gpu);  // a validated plan's GPU has a spec
  p.default_clocks = {s.default_sm_clock_mhz, s.max_mem_clock_mhz()};
  return p;
}

ClockPlan plan_from_json(const nlohmann::json& j, const std::string& source) {
  return clock_plan_from(plan::plan_file_from_json(j, source));
}

ClockPlan load_plan(const std::string& path) { return clock_plan_from(plan::read_plan_file(path)); }

}  // namespace gearshift::runtime
