#include "runtime/clock_plan.hpp"

#include <algorithm>
#include <fstream>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "gpu/spec.hpp"

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

namespace {
template <class T>
T field(const nlohmann::json& j, const char* key, const std::string& where) {
  auto it = j.find(key);
  if (it == j.end()) throw PlanError(where + ": missing field '" + key + "'");
  try {
    return it->get<T>();
  } catch (const nlohmann::json::exception&) {
    throw PlanError(where + ": field '" + key + "' has the wrong type");
  }
}
}  // namespace

ClockPlan plan_from_json(const nlohmann::json& j, const std::string& source) {
  if (!j.is_object() || j.value("format", "") != "gearshift-plan")
    throw PlanError(source + ": not a gearshift plan (format != \"gearshift-plan\")");
  ClockPlan p;
  p.gpu = field<std::string>(j, "gpu", source);
  p.period_ns = field<double>(j, "period_us", source) * 1e3;
  p.switch_latency_ns = field<double>(j, "switch_latency_us", source) * 1e3;
  const auto& pos = j.find("positions");
  if (pos == j.end() || !pos->is_array() || pos->empty()) throw PlanError(source + ": no 'positions'");
  for (std::size_t i = 0; i < pos->size(); ++i) {
    const auto& e = (*pos)[i];
    std::string where = source + ": positions[" + std::to_string(i) + "]";
    PlanPosition pp;
    pp.name = field<std::string>(e, "name", where);
    pp.duration_ns = field<double>(e, "duration_us", where) * 1e3;
    pp.start_offset_ns = field<double>(e, "start_offset_us", where) * 1e3;
    pp.clocks = {field<int>(e, "sm_clock_mhz", where), field<int>(e, "mem_clock_mhz", where)};
    if (auto k = e.find("kind"); k != e.end()) {  // absent in hand-written plans: a kernel
      if (!k->is_string()) throw PlanError(where + ": field 'kind' has the wrong type");
      pp.kernel = k->get<std::string>() == "kernel";
    }
    if (pp.duration_ns < 0 || pp.clocks.sm_mhz <= 0 || pp.clocks.mem_mhz <= 0)
      throw PlanError(where + ": negative duration or non-positive clock");
    p.positions.push_back(std::move(pp));
  }
  if (p.period_ns <= 0) throw PlanError(source + ": period_us must be > 0");
  gpu::GpuSpec s;
  try {
    s = gpu::find_spec(p.gpu);
  } catch (const std::exception& e) {
    throw PlanError(source + ": unknown GPU '" + p.gpu + "': " + e.what());
  }
  p.default_clocks = {s.default_sm_clock_mhz, s.max_mem_clock_mhz()};
  // The clocks must be the plan's GPU's: a plan made for another GPU, or corrupted, is refused, not clamped.
  for (std::size_t i = 0; i < p.positions.size(); ++i) {
    const auto& c = p.positions[i].clocks;
    if (c.sm_mhz < s.min_sm_clock_mhz() || c.sm_mhz > s.max_sm_clock_mhz() ||
        std::find(s.mem_clocks_mhz.begin(), s.mem_clocks_mhz.end(), c.mem_mhz) == s.mem_clocks_mhz.end())
      throw PlanError(fmt::format("{}: positions[{}]: SM {} MHz, memory {} MHz is not a clock pair of its GPU '{}' "
                                  "(SM {}-{} MHz, memory {} MHz)",
                                  source, i, c.sm_mhz, c.mem_mhz, p.gpu, s.min_sm_clock_mhz(), s.max_sm_clock_mhz(),
                                  fmt::join(s.mem_clocks_mhz, "/")));
  }
  return p;
}

ClockPlan load_plan(const std::string& path) {
  std::ifstream in(path);
  if (!in) throw PlanError(path + ": cannot open");
  nlohmann::json j = nlohmann::json::parse(in, nullptr, false);
  if (j.is_discarded()) throw PlanError(path + ": not valid JSON");
  return plan_from_json(j, path);
}

}  // namespace gearshift::runtime
