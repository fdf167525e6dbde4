#include "plan/clock_table.hpp"

#include <algorithm>

namespace gearshift::plan {

ClockTable build_clock_table(const model::Workload& w, const model::DvfsModel& m, int min_sm_mhz) {
  ClockTable t;
  const auto& spec = m.spec();
  for (int mem : spec.mem_clocks_mhz)
    for (int sm : spec.sm_clocks_mhz)
      if (sm >= min_sm_mhz) t.clocks.push_back({sm, mem});
  const model::ClockPair def{spec.default_sm_clock_mhz, spec.default_mem_clock_mhz};
  auto it = std::find(t.clocks.begin(), t.clocks.end(), def);
  t.default_index = it == t.clocks.end() ? t.clocks.size() - 1 : static_cast<std::size_t>(it - t.clocks.begin());
  t.ops = w.ops.size();
  const std::size_t nc = t.clocks.size();
  t.time_ns.resize(t.ops * nc);
  t.energy_j.resize(t.ops * nc);
  for (std::size_t i = 0; i < t.ops; ++i) {
    const auto& op = w.ops[i];
    for (std::size_t c = 0; c < nc; ++c) {
      auto p = m.predict(op.ref_time_ns, op.ref, t.clocks[c], op.coeffs);
      t.time_ns[i * nc + c] = p.time_ns;
      t.energy_j[i * nc + c] = p.energy_j;
    }
  }
  return t;
}

}  // namespace gearshift::plan
