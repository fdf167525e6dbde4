#include "sim/calibration_model.hpp"

#include <algorithm>
#include <cmath>
#include <fstream>
#include <limits>
#include <map>
#include <stdexcept>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "sim/measurement.hpp"
#include "sim/simulator.hpp"
#include "graph/step_graph.hpp"

namespace gearshift::sim {

namespace {

constexpr const char* kFormat = "gearshift-model";
constexpr int kVersion = 1;
// A power fit this far from the measured powers (rms, relative) does not describe the GPU: refused.
constexpr double kMaxPowerRms = 0.05;

nlohmann::json pair_json(model::ClockPair c) { return {{"sm_mhz", c.sm_mhz}, {"mem_mhz", c.mem_mhz}}; }

}  // namespace

namespace {
double median_of(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const std::size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}
}  // namespace

double SwitchLatency::median_down_ms() const { return median_of(down_ms); }
double SwitchLatency::median_up_ms() const { return median_of(up_ms); }
double SwitchLatency::plan_latency_ms() const { return std::max(median_down_ms(), median_up_ms()); }

void write_model_file(const CalibratedModel& m, const std::string& path) {
  nlohmann::json j;
  j["format"] = kFormat;
  j["version"] = kVersion;
  j["gpu"] = m.gpu;
  j["ref"] = pair_json(m.ref);
  j["board"] = {{"activity_scale", m.activity_scale},
                {"memory_w_at_max", m.memory_w_at_max},
                {"power_rms_relative_error", m.power_rms_relative_error}};
  auto& ks = j["kernels"] = nlohmann::json::array();
  for (const auto& k : m.kernels) {
    ks.push_back({{"name", k.name},
                  {"sm_share", k.sm_share},
                  {"mem_share", k.mem_share},
                  {"rms_relative_error", k.rms_relative_error},
                  {"pairs", k.pairs}});
    if (k.law == model::TimeLaw::roofline) ks.back()["law"] = "roofline";  // absent: additive (older files)
  }
  auto& ps = j["pairs"] = nlohmann::json::array();
  for (const auto& p : m.pairs)
    ps.push_back({{"locked", pair_json(p.locked)},
                  {"sampled_sm_mhz", p.sampled_sm_mhz},
                  {"window_s", static_cast<double>(p.window_ns) * 1e-9},
                  {"kernels", p.kernels},
                  {"steps", p.steps},
                  {"average_power_w", p.average_power_w}});
  if (m.switch_latency)
    j["switch_latency"] = {{"down_ms", m.switch_latency->down_ms},
                           {"up_ms", m.switch_latency->up_ms},
                           {"median_down_ms", m.switch_latency->median_down_ms()},
                           {"median_up_ms", m.switch_latency->median_up_ms()},
                           {"source", "measured by gearshift calibrate: a clock-lock call's return to NVML's sampled "
                                      "SM clock at the new clock (reads 0.5 ms apart)"}};
  j["provenance"] = {{"command", m.command}, {"created_utc", m.created_utc}, {"pair_choice", m.pair_choice},
                     {"tool", "gearshift calibrate"}};
  std::ofstream out(path);
  out << j.dump(2) << "\n";
  if (!out) throw std::runtime_error(fmt::format("{}: cannot write the model file", path));
}

CalibratedModel load_model_file(const std::string& path) {
  std::ifstream in(path);
  if (!in) throw std::runtime_error(fmt::format("{}: cannot read the model file", path));
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(in);
  } catch (const nlohmann::json::exception& e) {
    throw std::runtime_error(fmt::format("{}: not JSON: {}", path, e.what()));
  }
  auto bad = [&](const std::string& what) { return std::runtime_error(fmt::format("{}: {}", path, what)); };
  if (!j.is_object() || j.value("format", "") != kFormat)
    throw bad(fmt::format("not a gearshift model file (\"format\" must be \"{}\"; `gearshift calibrate -o` writes one)",
                          kFormat));
  if (j.value("version", 0) != kVersion) throw bad(fmt::format("model file version must be {}", kVersion));
  auto number = [&](const nlohmann::json& o, const char* key, const std::string& where) {
    if (!o.is_object() || !o.contains(key) || !o[key].is_number() || !std::isfinite(o[key].get<double>()))
      throw bad(fmt::format("{}\"{}\" must be a finite number", where, key));
    return o[key].get<double>();
  };
  CalibratedModel m;
  if (!j.contains("gpu") || !j["gpu"].is_string()) throw bad("\"gpu\" must be a spec name");
  m.gpu = j["gpu"].get<std::string>();
  const auto& ref = j.value("ref", nlohmann::json());
  m.ref = {static_cast<int>(number(ref, "sm_mhz", "ref.")), static_cast<int>(number(ref, "mem_mhz", "ref."))};
  if (m.ref.sm_mhz <= 0 || m.ref.mem_mhz <= 0) throw bad("ref clocks must be > 0 MHz");
  const auto& board = j.value("board", nlohmann::json());
  m.activity_scale = number(board, "activity_scale", "board.");
  m.memory_w_at_max = number(board, "memory_w_at_max", "board.");
  m.power_rms_relative_error = number(board, "power_rms_relative_error", "board.");
  if (!j.contains("kernels") || !j["kernels"].is_array()) throw bad("\"kernels\" must be an array");
  for (std::size_t i = 0; i < j["kernels"].size(); ++i) {
    const auto& k = j["kernels"][i];
    const std::string where = fmt::format("kernels[{}].", i);
    KernelFitEntry e;
    if (!k.is_object() || !k.contains("name") || !k["name"].is_string()) throw bad(where + "name must be a string");
    e.name = k["name"].get<std::string>();
    e.sm_share = number(k, "sm_share", where);
    e.mem_share = number(k, "mem_share", where);
    e.rms_relative_error = number(k, "rms_relative_error", where);
    e.pairs = static_cast<std::size_t>(number(k, "pairs", where));
    if (k.contains("law")) {
      const auto& law = k["law"];
      if (!law.is_string() || (law != "additive" && law != "roofline"))
        throw bad(where + "law must be \"additive\" or \"roofline\" (absent: additive), got " + law.dump());
      if (law == "roofline") e.law = model::TimeLaw::roofline;
    }
    if (e.law == model::TimeLaw::roofline) {
      // Both terms are in the law (a kink needs both), and each is at most the whole time at ref.
      if (!(e.sm_share > 0 && e.sm_share <= 1 + 1e-9 && e.mem_share > 0 && e.mem_share <= 1 + 1e-9))
        throw bad(fmt::format("kernels[{}]: a roofline kernel's sm_share and mem_share must each be > 0 and <= 1 "
                              "(its SM and memory terms at ref over its time there)", i));
    } else if (e.sm_share < 0 || e.mem_share < 0 || e.sm_share + e.mem_share > 1 + 1e-9) {
      throw bad(where + "sm_share and mem_share must be >= 0 with a sum <= 1");
    }
    m.kernels.push_back(std::move(e));
  }
  if (j.contains("pairs") && j["pairs"].is_array())
    for (const auto& p : j["pairs"]) {
      PairMeasurement pm;
      const auto& l = p.value("locked", nlohmann::json());
      pm.locked = {static_cast<int>(number(l, "sm_mhz", "pairs[].locked.")),
                   static_cast<int>(number(l, "mem_mhz", "pairs[].locked."))};
      pm.sampled_sm_mhz = number(p, "sampled_sm_mhz", "pairs[].");
      pm.window_ns = std::llround(number(p, "window_s", "pairs[].") * 1e9);
      pm.kernels = static_cast<std::size_t>(number(p, "kernels", "pairs[]."));
      pm.steps = number(p, "steps", "pairs[].");
      pm.average_power_w = number(p, "average_power_w", "pairs[].");
      m.pairs.push_back(pm);
    }
  if (j.contains("switch_latency") && j["switch_latency"].is_object()) {
    SwitchLatency sl;
    for (const char* dir : {"down_ms", "up_ms"}) {
      const auto& a = j["switch_latency"].value(dir, nlohmann::json::array());
      if (!a.is_array()) throw bad(std::string("switch_latency.") + dir + " must be an array of ms");
      for (const auto& v : a) {
        if (!v.is_number() || !std::isfinite(v.get<double>()) || v.get<double>() < 0)
          throw bad(std::string("switch_latency.") + dir + " must hold non-negative numbers of ms");
        (std::string(dir) == "down_ms" ? sl.down_ms : sl.up_ms).push_back(v.get<double>());
      }
    }
    m.switch_latency = sl;
  }
  const auto& prov = j.value("provenance", nlohmann::json::object());
  m.command = prov.value("command", "");
  m.created_utc = prov.value("created_utc", "");
  m.pair_choice = prov.value("pair_choice", "");
  return m;
}

model::PowerParams model_power_params(const CalibratedModel& m, const gpu::GpuSpec& spec) {
  model::PowerParams p = model::power_params_for(spec, m.memory_w_at_max);
  p.activity_scale = m.activity_scale;
  return p;
}

AppliedModel apply_model(const CalibratedModel& m, model::Workload& w, model::DvfsModel& dm) {
  if (m.gpu != dm.spec().name)
    throw std::invalid_argument(fmt::format("the model file was calibrated on a {} GPU, the plan is for {}", m.gpu,
                                            dm.spec().name));
  std::map<std::string, const KernelFitEntry*> by_name;
  for (const auto& k : m.kernels) by_name[k.name] = &k;
  dm.set_params(model_power_params(m, dm.spec()));
  model::refresh_reference_clocks(w, dm);
  AppliedModel a;
  for (auto& op : w.ops) {
    if (op.kind != trace::OpKind::kernel) continue;
    ++a.kernel_ops;
    auto it = by_name.find(op.name);
    if (it == by_name.end()) {
      a.graph_ops_unmatched += op.graph_id != 0;
      continue;
    }
    // t(f, m)/t(ref) = a·ref_f/f + b·ref_m/m + 1 − a − b; at the op's reference o the same law has
    // a_o = a·(ref_f/o_f)/R_o, b_o = b·(ref_m/o_m)/R_o with R_o = t(o)/t(ref). The roofline's
    // max(a·ref_f/f, b·ref_m/m) + 1 − max(a, b) keeps the same a_o, b_o with R_o its own t(o)/t(ref).
    const double a_ref = it->second->sm_share, b_ref = it->second->mem_share;
    const double rf = static_cast<double>(m.ref.sm_mhz) / op.ref.sm_mhz;
    const double rm = static_cast<double>(m.ref.mem_mhz) / op.ref.mem_mhz;
    const bool roofline = it->second->law == model::TimeLaw::roofline;
    const double r_o = roofline ? std::max(a_ref * rf, b_ref * rm) + 1 - std::max(a_ref, b_ref)
                                : a_ref * rf + b_ref * rm + 1 - a_ref - b_ref;
    op.coeffs.sm_share = a_ref * rf / r_o;
    op.coeffs.mem_share = b_ref * rm / r_o;
    op.coeffs.time_law = it->second->law;
    ++a.ops_matched;
  }
  return a;
}

std::string applied_model_summary(const AppliedModel& a) {
  std::string s = fmt::format("fitted a, b for {} of {} kernel positions (class priors for the rest", a.ops_matched,
                              a.kernel_ops);
  if (a.graph_ops_unmatched > 0)
    s += fmt::format("; {} of them run in CUDA graphs: a model file from before the launch feed named a graph's "
                     "kernels has none of them",
                     a.graph_ops_unmatched);
  return s + ")";
}

PowerFit fit_board_power(model::Workload& w, model::DvfsModel& dm, const std::vector<PairMeasurement>& pairs) {
  if (pairs.size() < 2) throw std::invalid_argument("fit_board_power: need the power at 2 or more clock pairs");
  for (const auto& p : pairs)
    if (!(p.average_power_w > 0)) throw std::invalid_argument("fit_board_power: a measured power is not > 0 W");
  const gpu::GpuSpec& spec = dm.spec();
  const graph::StepGraph graph = graph::build_step_graph(w);
  auto sse = [&](double s, double mem) {
    model::PowerParams p = model::power_params_for(spec, mem);
    p.activity_scale = s;
    dm.set_params(p);
    double e = 0;
    for (const auto& pm : pairs) {
      plan::Schedule sch;
      sch.strategy = plan::Strategy::iteration;
      sch.clocks.assign(w.ops.size(), pm.locked);
      const double r = simulate(w, graph, dm, sch, 0).average_power_w / pm.average_power_w - 1;
      e += r * r;
    }
    return e;
  };
  double s_lo = 0.05, s_hi = 5.0, m_lo = 0, m_hi = spec.max_board_power_w;
  double best_s = 1, best_m = spec.memory_power_w_at_max_clock, best = std::numeric_limits<double>::infinity();
  constexpr int kGrid = 24;
  for (int round = 0; round < 3; ++round) {
    for (int i = 0; i <= kGrid; ++i)
      for (int k = 0; k <= kGrid; ++k) {
        const double s = s_lo + (s_hi - s_lo) * i / kGrid, mem = m_lo + (m_hi - m_lo) * k / kGrid;
        const double e = sse(s, mem);
        if (e < best) best = e, best_s = s, best_m = mem;
      }
    // The next grid: two cells either side of the best, inside the search's bounds.
    const double ds = 2 * (s_hi - s_lo) / kGrid, dmw = 2 * (m_hi - m_lo) / kGrid;
    s_lo = std::max(0.05, best_s - ds), s_hi = std::min(5.0, best_s + ds);
    m_lo = std::max(0.0, best_m - dmw), m_hi = std::min(spec.max_board_power_w, best_m + dmw);
  }
  sse(best_s, best_m);  // leaves dm at the fit
  PowerFit f;
  f.activity_scale = best_s;
  f.memory_w_at_max = best_m;
  f.rms_relative_error = std::sqrt(best / static_cast<double>(pairs.size()));
  f.at_bound = best_s <= 0.05 + 1e-9 || best_s >= 5.0 - 1e-9 || best_m <= 1e-9 || best_m >= spec.max_board_power_w - 1e-9;
  return f;
}

std::vector<std::string> implausible_model(const CalibratedModel& m, const gpu::GpuSpec& spec) {
  std::vector<std::string> why;
  const bool power_at_bound = m.activity_scale <= 0.05 + 1e-9 || m.activity_scale >= 5.0 - 1e-9 ||
                              m.memory_w_at_max <= 1e-9 || m.memory_w_at_max >= spec.max_board_power_w - 1e-9;
  const model::DvfsModel dm(spec, model_power_params(m, spec));
  for (auto& w : implausible_calibration(dm)) why.push_back(std::move(w));
  // The fitted memory power follows the memory clock across the pairs: DRAM bounds it (measurement.hpp).
  if (const double mem_max = max_memory_power_w(spec); m.memory_w_at_max > mem_max)
    why.push_back(fmt::format("memory power {:.0f} W at full traffic, above {:.0f} W ({:.0f} % of the {:.0f} W board "
                              "power; DRAM access energy puts it near 20 %, the spec estimates {:.0f} W)",
                              m.memory_w_at_max, mem_max, 100 * kMaxMemoryShareOfBoard, spec.max_board_power_w,
                              spec.memory_power_w_at_max_clock));
  if (power_at_bound)
    why.push_back(fmt::format("the power fit ended at its search bound (activity scale {:.3f} in [0.05, 5], memory/uncore "
                              "power {:.0f} W in [0, {:.0f}] W): no model of this form reproduces the measured powers",
                              m.activity_scale, m.memory_w_at_max, spec.max_board_power_w));
  if (m.power_rms_relative_error > kMaxPowerRms)
    why.push_back(fmt::format("the fitted power is {:.1f} % (rms) off the measured powers, more than {:.0f} %",
                              100 * m.power_rms_relative_error, 100 * kMaxPowerRms));
  if (m.kernels.empty()) why.push_back("no kernel's time was fitted");
  return why;
}

}  // namespace gearshift::sim
