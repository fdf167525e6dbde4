#include "plan/plan_file.hpp"

#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <map>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <limits>
#include <system_error>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "gpu/spec.hpp"

namespace gearshift::plan {

using nlohmann::json;

namespace {

[[noreturn]] void fail(const std::string& where, const std::string& what) { throw PlanFileError(where + ": " + what); }

// A value as the message shows it: its JSON text, shortened.
std::string shown(const json& v) {
  std::string s = v.dump();
  if (s.size() > 40) s = s.substr(0, 37) + "...";
  return s;
}

const json* find(const json& obj, const char* key) {
  auto it = obj.find(key);
  return it == obj.end() ? nullptr : &*it;
}

const json& need(const json& obj, const char* key, const std::string& where) {
  const json* v = find(obj, key);
  if (v == nullptr) fail(where, fmt::format("missing field '{}'", key));
  return *v;
}

double as_number(const json& v, const char* key, const std::string& where, const char* unit) {
  if (!v.is_number()) fail(where, fmt::format("'{}' is {}, not a number ({})", key, shown(v), unit));
  const double d = v.get<double>();
  if (!std::isfinite(d)) fail(where, fmt::format("'{}' is {}, not a finite number ({})", key, shown(v), unit));
  return d;
}

double number(const json& obj, const char* key, const std::string& where, const char* unit) {
  return as_number(need(obj, key, where), key, where, unit);
}

std::optional<double> opt_number(const json& obj, const char* key, const std::string& where, const char* unit) {
  const json* v = find(obj, key);
  if (v == nullptr || v->is_null()) return std::nullopt;
  return as_number(*v, key, where, unit);
}

// A whole number (an integer, or a float with no fraction) within int's range.
long long as_whole(const json& v, const char* key, const std::string& where, const char* unit) {
  const double d = as_number(v, key, where, unit);
  if (d != std::floor(d) || std::fabs(d) > 2e9)
    fail(where, fmt::format("'{}' is {}, not a whole number ({})", key, shown(v), unit));
  return static_cast<long long>(d);
}

std::optional<long long> opt_whole(const json& obj, const char* key, const std::string& where, const char* unit) {
  const json* v = find(obj, key);
  if (v == nullptr || v->is_null()) return std::nullopt;
  return as_whole(*v, key, where, unit);
}

std::string as_string(const json& v, const char* key, const std::string& where) {
  if (!v.is_string()) fail(where, fmt::format("'{}' is {}, not a string", key, shown(v)));
  return v.get<std::string>();
}

std::string string_field(const json& obj, const char* key, const std::string& where) {
  return as_string(need(obj, key, where), key, where);
}

// "" when absent or null.
std::string opt_string(const json& obj, const char* key, const std::string& where) {
  const json* v = find(obj, key);
  if (v == nullptr || v->is_null()) return {};
  return as_string(*v, key, where);
}

bool opt_bool(const json& obj, const char* key, const std::string& where, bool otherwise) {
  const json* v = find(obj, key);
  if (v == nullptr || v->is_null()) return otherwise;
  if (!v->is_boolean()) fail(where, fmt::format("'{}' is {}, not true or false", key, shown(*v)));
  return v->get<bool>();
}

std::vector<std::string> opt_strings(const json& obj, const char* key, const std::string& where) {
  std::vector<std::string> out;
  const json* v = find(obj, key);
  if (v == nullptr || v->is_null()) return out;
  if (!v->is_array()) fail(where, fmt::format("'{}' is {}, not a list of strings", key, shown(*v)));
  for (std::size_t i = 0; i < v->size(); ++i)
    out.push_back(as_string((*v)[i], key, fmt::format("{}: {}[{}]", where, key, i)));
  return out;
}

const json* opt_object(const json& obj, const char* key, const std::string& where) {
  const json* v = find(obj, key);
  if (v == nullptr || v->is_null()) return nullptr;
  if (!v->is_object()) fail(where, fmt::format("'{}' is {}, not an object", key, shown(*v)));
  return v;
}

model::ClockPair clocks_of(const json& obj, const std::string& where) {
  return {static_cast<int>(as_whole(need(obj, "sm_clock_mhz", where), "sm_clock_mhz", where, "MHz")),
          static_cast<int>(as_whole(need(obj, "mem_clock_mhz", where), "mem_clock_mhz", where, "MHz"))};
}

trace::OpKind kind_of(const json& obj, const std::string& where) {
  const json* v = find(obj, "kind");
  if (v == nullptr)
    fail(where, "missing field 'kind' (kernel, memcpy or memset; plans from gearshift before issue 14 lacked it "
                "in plan-ranks: make the plan again)");
  const std::string k = as_string(*v, "kind", where);
  for (trace::OpKind o : {trace::OpKind::kernel, trace::OpKind::memcpy, trace::OpKind::memset})
    if (k == trace::to_string(o)) return o;
  fail(where, fmt::format("'kind' is {}: kernel, memcpy or memset", shown(*v)));
}

json or_null(const std::string& s) { return s.empty() ? json(nullptr) : json(s); }
template <class T>
json or_null(const std::optional<T>& v) {
  return v ? json(*v) : json(nullptr);
}

std::string clocks_text(const gpu::GpuSpec& s) {
  return fmt::format("SM {}-{} MHz, memory {} MHz", s.min_sm_clock_mhz(), s.max_sm_clock_mhz(),
                     fmt::join(s.mem_clocks_mhz, "/"));
}

bool settable(const gpu::GpuSpec& s, const model::ClockPair& c) {
  return std::binary_search(s.sm_clocks_mhz.begin(), s.sm_clocks_mhz.end(), c.sm_mhz) &&
         std::find(s.mem_clocks_mhz.begin(), s.mem_clocks_mhz.end(), c.mem_mhz) != s.mem_clocks_mhz.end();
}

}  // namespace

PlanFileModel model_section(const model::PowerParams& p, std::optional<double> calibrated_to_power_w) {
  PlanFileModel m;
  m.formula = "t = t_ref (a f_ref/f + b m_ref/m + 1-a-b); P = P_idle(f) + s u P_dyn (V/Vmax)^2 f/fmax + w P_mem "
              "m/mmax; power-capped";
  m.coefficients = "class priors (src/model/kernel_class.cpp)";
  m.idle_w_at_min_clock = p.idle_w_at_min_clock;
  m.idle_w_at_max_clock = p.idle_w_at_max_clock;
  m.knee_mhz = p.knee_mhz;
  m.v_min_ratio = p.v_min_ratio;
  m.dynamic_w_at_max = p.dynamic_w_at_max;
  m.memory_w_at_max = p.memory_w_at_max;
  m.power_cap_w = p.power_cap_w;
  m.activity_scale = p.activity_scale;
  m.calibrated_to_power_w = calibrated_to_power_w;
  return m;
}

std::vector<PlanFilePhase> PlanFile::phases_from_positions() const {
  std::vector<PlanFilePhase> out;
  for (std::size_t i = 0; i < positions.size(); ++i) {
    if (!out.empty() && out.back().clocks == positions[i].clocks) {
      out.back().last_position = i;
      continue;
    }
    out.push_back({i, i, positions[i].name, positions[i].clocks});
  }
  return out;
}

json to_json(const PlanFile& p) {
  json j;
  j["format"] = kPlanFormat;
  j["version"] = p.version;
  j["gpu"] = p.gpu;
  if (p.gpu_selection) {
    const auto& g = *p.gpu_selection;
    j["gpu_selection"] = {{"spec", g.spec}, {"source", g.source}, {"trace_gpu", or_null(g.trace_gpu)},
                          {"trace_spec", or_null(g.trace_spec)}};
  }
  j["strategy"] = p.strategy;
  j["switch_latency_us"] = p.switch_latency_us;
  if (p.max_slowdown) j["max_slowdown"] = *p.max_slowdown;
  if (p.rank) j["rank"] = *p.rank;
  if (p.deadline_s) j["deadline_s"] = *p.deadline_s;
  if (p.straggler_factor) j["straggler_factor"] = *p.straggler_factor;
  if (p.predicted) {
    const auto& f = *p.predicted;
    json pr = {{"modelled", true}, {"low_confidence", f.low_confidence}};
    auto put = [&](const char* k, const auto& v) {
      if (v) pr[k] = *v;
    };
    put("time_s", f.time_s);
    put("energy_j", f.energy_j);
    put("saving_pct", f.saving_pct);
    put("slowdown_pct", f.slowdown_pct);
    put("baseline_time_s", f.baseline_time_s);
    put("baseline_energy_j", f.baseline_energy_j);
    put("clock_changes_per_step", f.clock_changes_per_step);
    put("saving_low_pct", f.saving_low_pct);
    put("saving_high_pct", f.saving_high_pct);
    put("time_low_s", f.time_low_s);
    put("time_high_s", f.time_high_s);
    put("p_over_budget", f.p_over_budget);
    put("range_samples", f.range_samples);
    j["predicted"] = pr;
  }
  json phases = json::array();
  for (const auto& ph : p.phases)
    phases.push_back({{"first_position", ph.first_position}, {"last_position", ph.last_position},
                      {"first_op", ph.first_op}, {"sm_clock_mhz", ph.clocks.sm_mhz},
                      {"mem_clock_mhz", ph.clocks.mem_mhz}});
  j["phases"] = phases;
  json positions = json::array();
  for (const auto& x : p.positions) {
    json e = {{"name", x.name}, {"kind", trace::to_string(x.kind)}};
    if (x.stream) e["stream"] = *x.stream;
    if (!x.cls.empty()) e["class"] = x.cls;
    if (!x.pass.empty()) e["pass"] = x.pass;
    e["duration_us"] = x.duration_us;
    e["start_offset_us"] = x.start_offset_us;
    if (x.launch_offset_us) e["launch_offset_us"] = *x.launch_offset_us;
    e["sm_clock_mhz"] = x.clocks.sm_mhz;
    e["mem_clock_mhz"] = x.clocks.mem_mhz;
    if (x.graph_launch >= 0) {
      e["graph"] = x.graph_id;
      e["graph_launch"] = x.graph_launch;
    }
    positions.push_back(std::move(e));
  }
  j["positions"] = positions;
  if (!p.variants.empty()) {
    json variants = json::array();
    for (const auto& v : p.variants) {
      json e = {{"after", v.after}, {"steps", v.steps}};
      if (v.skip > 0) e["skip"] = v.skip;
      json ops = json::array();
      for (const auto& [name, kind] : v.ops) ops.push_back({{"name", name}, {"kind", trace::to_string(kind)}});
      if (!v.ops.empty()) e["ops"] = ops;
      variants.push_back(std::move(e));
    }
    j["variants"] = variants;
  }
  j["period_us"] = p.period_us;
  if (p.model) {
    const auto& m = *p.model;
    j["model"] = {{"formula", m.formula},
                  {"idle_w_at_min_clock", m.idle_w_at_min_clock},
                  {"idle_w_at_max_clock", m.idle_w_at_max_clock},
                  {"knee_mhz", m.knee_mhz},
                  {"v_min_ratio", m.v_min_ratio},
                  {"dynamic_w_at_max", m.dynamic_w_at_max},
                  {"memory_w_at_max", m.memory_w_at_max},
                  {"power_cap_w", m.power_cap_w},
                  {"activity_scale", m.activity_scale},
                  {"calibrated_to_power_w", or_null(m.calibrated_to_power_w)},
                  {"coefficients", m.coefficients}};
  }
  if (p.provenance) {
    const auto& v = *p.provenance;
    j["provenance"] = {{"input", v.input},
                       {"format", v.format},
                       {"trace_meta", v.trace_meta},
                       {"iterations", or_null(v.iterations)},
                       {"iteration_method", v.iteration_method},
                       {"step_confidence", or_null(v.step_confidence)},
                       {"device", or_null(v.device)},
                       {"warnings", v.warnings},
                       {"step_evidence", v.step_evidence},
                       {"created", v.created},
                       {"gearshift_version", v.gearshift_version}};
  }
  return j;
}

void validate(const PlanFile& p, const std::string& source) {
  if (p.version < 1 || p.version > kPlanFileVersion)
    fail(source, fmt::format("plan version {} is not one this gearshift reads (1-{}): make the plan again with "
                             "this gearshift, or update gearshift",
                             p.version, kPlanFileVersion));
  gpu::GpuSpec spec;
  try {
    spec = gpu::find_spec(p.gpu);
  } catch (const std::invalid_argument& e) {
    fail(source, fmt::format("'gpu' is \"{}\", a GPU without a spec: {}", p.gpu, e.what()));
  }
  if (!(p.period_us > 0) || !std::isfinite(p.period_us))
    fail(source, fmt::format("'period_us' is {}: the step time must be > 0 µs", p.period_us));
  // At most a minute: a Hopper clock change takes milliseconds, and replay steps through the latency in virtual
  // time (3e11 µs ran past 30 s).
  if (!(p.switch_latency_us >= 0) || !std::isfinite(p.switch_latency_us) || p.switch_latency_us > 6e7)
    fail(source, fmt::format("'switch_latency_us' is {}: the switch latency must be in [0, 60,000,000] µs (a minute)",
                             p.switch_latency_us));
  if (p.max_slowdown && !(*p.max_slowdown >= 0 && *p.max_slowdown <= 1))
    fail(source, fmt::format("'max_slowdown' is {}: a fraction in [0, 1] (0.005 is 0.5 %)", *p.max_slowdown));
  if (p.positions.empty()) fail(source, "'positions' is empty: a plan needs at least one template position");
  for (std::size_t i = 0; i < p.positions.size(); ++i) {
    const auto& x = p.positions[i];
    const std::string where = fmt::format("{}: positions[{}]", source, i);
    if (!(x.duration_us >= 0) || !std::isfinite(x.duration_us))
      fail(where, fmt::format("'duration_us' is {}: must be >= 0 µs", x.duration_us));
    if (!std::isfinite(x.start_offset_us)) fail(where, "'start_offset_us' is not a finite number (µs)");
    if (!settable(spec, x.clocks))
      fail(where, fmt::format("SM {} MHz, memory {} MHz is not a clock pair of its GPU '{}' ({}): see `gearshift gpus "
                              "--spec {}`",
                              x.clocks.sm_mhz, x.clocks.mem_mhz, p.gpu, clocks_text(spec), spec.name));
  }
  // One graph launch is one unit: the GPU runs it without the CPU, so no clock change can land inside it.
  std::map<std::int64_t, std::size_t> launch_first;  // graph launch -> its first position
  for (std::size_t i = 0; i < p.positions.size(); ++i) {
    const auto& x = p.positions[i];
    if (x.graph_launch < 0) continue;
    auto [it, fresh] = launch_first.try_emplace(x.graph_launch, i);
    const auto& first = p.positions[it->second];
    const std::string where = fmt::format("{}: positions[{}]", source, i);
    if (first.graph_id != x.graph_id)
      fail(where, fmt::format("graph launch {} is graph {} at positions[{}] but graph {} here", x.graph_launch,
                              first.graph_id, it->second, x.graph_id));
    if (!(first.clocks == x.clocks))
      fail(where, fmt::format("a clock change inside CUDA graph launch {} (positions[{}] wants SM {} MHz, memory {} "
                              "MHz; this one SM {} MHz, memory {} MHz): a graph runs without the CPU, so clocks "
                              "can change only between graph launches",
                              x.graph_launch, it->second, first.clocks.sm_mhz, first.clocks.mem_mhz, x.clocks.sm_mhz,
                              x.clocks.mem_mhz));
  }
  const std::size_t n = p.positions.size();
  for (std::size_t k = 0; k < p.variants.size(); ++k) {
    const auto& v = p.variants[k];
    const std::string where = fmt::format("{}: variants[{}]", source, k);
    if (v.after < -1 || v.after >= static_cast<std::int64_t>(n))
      fail(where, fmt::format("'after' is {}, out of range: the plan has {} positions (-1 to {})", v.after, n, n - 1));
    if (v.ops.empty() && v.skip == 0)
      fail(where, "a variant inserts ops ('ops', not empty), leaves positions out ('skip' > 0), or both; this one does "
                  "neither");
    if (v.after + static_cast<std::int64_t>(v.skip) >= static_cast<std::int64_t>(n))
      fail(where, fmt::format("'skip' {} after position {} runs past the plan's {} positions", v.skip, v.after, n));
  }
  for (std::size_t k = 0; k < p.phases.size(); ++k) {
    const auto& ph = p.phases[k];
    const std::string where = fmt::format("{}: phases[{}]", source, k);
    for (auto [key, v] : {std::pair{"first_position", ph.first_position}, std::pair{"last_position", ph.last_position}})
      if (v >= n)
        fail(where, fmt::format("'{}' is {}, out of range: the plan has {} positions (0-{})", key, v, n, n - 1));
    if (ph.first_position > ph.last_position)
      fail(where, fmt::format("'first_position' {} is after 'last_position' {}", ph.first_position, ph.last_position));
    if (k > 0) {
      const auto& prev = p.phases[k - 1];
      if (ph.first_position < prev.first_position)
        fail(where, fmt::format("positions {}-{} come before phases[{}] ({}-{}): phases must be in position order",
                                ph.first_position, ph.last_position, k - 1, prev.first_position, prev.last_position));
      if (ph.first_position <= prev.last_position)
        fail(where, fmt::format("positions {}-{} overlap phases[{}] ({}-{})", ph.first_position, ph.last_position,
                                k - 1, prev.first_position, prev.last_position));
    }
    if (!settable(spec, ph.clocks))
      fail(where, fmt::format("SM {} MHz, memory {} MHz is not a clock pair of its GPU '{}' ({}): see `gearshift gpus "
                              "--spec {}`",
                              ph.clocks.sm_mhz, ph.clocks.mem_mhz, p.gpu, clocks_text(spec), spec.name));
    for (std::size_t i = ph.first_position; i <= ph.last_position; ++i)
      if (!(p.positions[i].clocks == ph.clocks))
        fail(where, fmt::format("SM {} MHz, memory {} MHz, but positions[{}] inside it has SM {} MHz, memory {} MHz: "
                                "phases and positions disagree",
                                ph.clocks.sm_mhz, ph.clocks.mem_mhz, i, p.positions[i].clocks.sm_mhz,
                                p.positions[i].clocks.mem_mhz));
  }
}

PlanFile plan_file_from_json(const json& j, const std::string& source) {
  if (!j.is_object()) fail(source, fmt::format("not a gearshift plan: the JSON is {}, not an object", j.type_name()));
  const json* format = find(j, "format");
  if (format == nullptr) fail(source, "not a gearshift plan: no 'format' field (a plan has \"format\": \"gearshift-plan\")");
  if (!format->is_string() || format->get<std::string>() != kPlanFormat)
    fail(source, fmt::format("not a gearshift plan: 'format' is {}, not \"{}\"", shown(*format), kPlanFormat));
  PlanFile p;
  const long long version = as_whole(need(j, "version", source), "version", source, "the plan format's version");
  if (version > kPlanFileVersion)
    fail(source, fmt::format("plan version {} is newer than this gearshift reads ({}): update gearshift, or make the "
                             "plan again with this one",
                             version, kPlanFileVersion));
  if (version < 1) fail(source, fmt::format("'version' is {}: plan versions start at 1", version));
  p.version = static_cast<int>(version);
  p.gpu = string_field(j, "gpu", source);
  if (const json* g = opt_object(j, "gpu_selection", source)) {
    const std::string w = source + ": gpu_selection";
    p.gpu_selection = PlanFileGpuSelection{opt_string(*g, "spec", w), opt_string(*g, "source", w),
                                           opt_string(*g, "trace_gpu", w), opt_string(*g, "trace_spec", w)};
  }
  p.strategy = opt_string(j, "strategy", source);
  p.switch_latency_us = number(j, "switch_latency_us", source, "µs");
  p.max_slowdown = opt_number(j, "max_slowdown", source, "a fraction");
  p.period_us = number(j, "period_us", source, "µs");
  if (auto r = opt_whole(j, "rank", source, "a rank")) p.rank = static_cast<int>(*r);
  p.deadline_s = opt_number(j, "deadline_s", source, "s");
  p.straggler_factor = opt_number(j, "straggler_factor", source, "a factor");

  const json* pos = find(j, "positions");
  if (pos == nullptr) fail(source, "no 'positions': a plan needs the clocks of each template position");
  if (!pos->is_array()) fail(source, fmt::format("'positions' is {}, not a list", shown(*pos)));
  if (pos->empty()) fail(source, "'positions' is empty: a plan needs at least one template position");
  p.positions.reserve(pos->size());
  for (std::size_t i = 0; i < pos->size(); ++i) {
    const json& e = (*pos)[i];
    const std::string where = fmt::format("{}: positions[{}]", source, i);
    if (!e.is_object()) fail(where, fmt::format("is {}, not an object", shown(e)));
    PlanFilePosition x;
    x.name = string_field(e, "name", where);
    x.kind = kind_of(e, where);
    if (auto s = opt_whole(e, "stream", where, "a CUDA stream id")) x.stream = static_cast<std::int32_t>(*s);
    x.cls = opt_string(e, "class", where);
    x.pass = opt_string(e, "pass", where);
    x.duration_us = number(e, "duration_us", where, "µs");
    x.start_offset_us = number(e, "start_offset_us", where, "µs");
    x.launch_offset_us = opt_number(e, "launch_offset_us", where, "µs");
    x.clocks = clocks_of(e, where);
    if (auto g = opt_whole(e, "graph_launch", where, "a graph launch ordinal")) {
      x.graph_launch = *g;
      auto id = opt_whole(e, "graph", where, "a CUDA graph id");
      if (!id || *id <= 0 || *id > 0xffffffffLL) fail(where, "'graph_launch' needs 'graph', a CUDA graph id > 0");
      x.graph_id = static_cast<std::uint32_t>(*id);
    }
    p.positions.push_back(std::move(x));
  }
  if (const json* ph = find(j, "phases"); ph != nullptr && !ph->is_null()) {
    if (!ph->is_array()) fail(source, fmt::format("'phases' is {}, not a list", shown(*ph)));
    for (std::size_t k = 0; k < ph->size(); ++k) {
      const json& e = (*ph)[k];
      const std::string where = fmt::format("{}: phases[{}]", source, k);
      if (!e.is_object()) fail(where, fmt::format("is {}, not an object", shown(e)));
      PlanFilePhase f;
      for (auto [key, out] : {std::pair{"first_position", &f.first_position}, std::pair{"last_position", &f.last_position}}) {
        const long long v = as_whole(need(e, key, where), key, where, "a position index");
        if (v < 0) fail(where, fmt::format("'{}' is {}: position indices start at 0", key, v));
        *out = static_cast<std::size_t>(v);
      }
      f.first_op = opt_string(e, "first_op", where);
      f.clocks = clocks_of(e, where);
      p.phases.push_back(std::move(f));
    }
  }
  if (const json* vs = find(j, "variants"); vs != nullptr && !vs->is_null()) {
    if (!vs->is_array()) fail(source, fmt::format("'variants' is {}, not a list", shown(*vs)));
    for (std::size_t k = 0; k < vs->size(); ++k) {
      const json& e = (*vs)[k];
      const std::string where = fmt::format("{}: variants[{}]", source, k);
      if (!e.is_object()) fail(where, fmt::format("is {}, not an object", shown(e)));
      PlanFileVariant v;
      v.after = as_whole(need(e, "after", where), "after", where, "a position index, -1: before the first");
      for (auto [key, out] : {std::pair{"skip", &v.skip}, std::pair{"steps", &v.steps}}) {
        const long long c = opt_whole(e, key, where, "a count").value_or(0);
        if (c < 0) fail(where, fmt::format("'{}' is {}: a count is >= 0", key, c));
        *out = static_cast<std::size_t>(c);
      }
      if (const json* ops = find(e, "ops"); ops != nullptr && !ops->is_null()) {
        if (!ops->is_array()) fail(where, fmt::format("'ops' is {}, not a list", shown(*ops)));
        for (std::size_t i = 0; i < ops->size(); ++i) {
          const std::string w = fmt::format("{}: ops[{}]", where, i);
          if (!(*ops)[i].is_object()) fail(w, fmt::format("is {}, not an object", shown((*ops)[i])));
          v.ops.emplace_back(string_field((*ops)[i], "name", w), kind_of((*ops)[i], w));
        }
      }
      p.variants.push_back(std::move(v));
    }
  }
  if (const json* pr = opt_object(j, "predicted", source)) {
    const std::string w = source + ": predicted";
    PlanFilePredicted f;
    if (!opt_bool(*pr, "modelled", w, true)) fail(w, "'modelled' is false: a plan's predicted figures are modelled");
    f.low_confidence = opt_bool(*pr, "low_confidence", w, false);
    f.time_s = opt_number(*pr, "time_s", w, "s");
    f.energy_j = opt_number(*pr, "energy_j", w, "J");
    f.saving_pct = opt_number(*pr, "saving_pct", w, "%");
    f.slowdown_pct = opt_number(*pr, "slowdown_pct", w, "%");
    f.baseline_time_s = opt_number(*pr, "baseline_time_s", w, "s");
    f.baseline_energy_j = opt_number(*pr, "baseline_energy_j", w, "J");
    if (auto c = opt_whole(*pr, "clock_changes_per_step", w, "a count")) {
      if (*c < 0) fail(w, "'clock_changes_per_step' is negative");
      f.clock_changes_per_step = static_cast<std::size_t>(*c);
    }
    f.saving_low_pct = opt_number(*pr, "saving_low_pct", w, "%");
    f.saving_high_pct = opt_number(*pr, "saving_high_pct", w, "%");
    f.time_low_s = opt_number(*pr, "time_low_s", w, "s");
    f.time_high_s = opt_number(*pr, "time_high_s", w, "s");
    f.p_over_budget = opt_number(*pr, "p_over_budget", w, "a probability");
    if (f.p_over_budget && !(*f.p_over_budget >= 0 && *f.p_over_budget <= 1))
      fail(w, "'p_over_budget' must lie in [0, 1]");
    if (auto c = opt_whole(*pr, "range_samples", w, "a count")) {
      if (*c <= 0) fail(w, "'range_samples' must be > 0");
      f.range_samples = static_cast<std::size_t>(*c);
    }
    p.predicted = f;
  }
  if (const json* m = opt_object(j, "model", source)) {
    const std::string w = source + ": model";
    PlanFileModel f;
    f.formula = opt_string(*m, "formula", w);
    f.coefficients = opt_string(*m, "coefficients", w);
    f.idle_w_at_min_clock = opt_number(*m, "idle_w_at_min_clock", w, "W").value_or(0);
    f.idle_w_at_max_clock = opt_number(*m, "idle_w_at_max_clock", w, "W").value_or(0);
    f.knee_mhz = static_cast<int>(opt_whole(*m, "knee_mhz", w, "MHz").value_or(0));
    f.v_min_ratio = opt_number(*m, "v_min_ratio", w, "a ratio").value_or(0);
    f.dynamic_w_at_max = opt_number(*m, "dynamic_w_at_max", w, "W").value_or(0);
    f.memory_w_at_max = opt_number(*m, "memory_w_at_max", w, "W").value_or(0);
    f.power_cap_w = opt_number(*m, "power_cap_w", w, "W").value_or(0);
    f.activity_scale = opt_number(*m, "activity_scale", w, "a factor").value_or(1);
    f.calibrated_to_power_w = opt_number(*m, "calibrated_to_power_w", w, "W");
    p.model = f;
  }
  if (const json* v = opt_object(j, "provenance", source)) {
    const std::string w = source + ": provenance";
    PlanFileProvenance f;
    f.input = opt_string(*v, "input", w);
    f.format = opt_string(*v, "format", w);
    if (const json* m = find(*v, "trace_meta")) f.trace_meta = *m;
    if (auto it = opt_whole(*v, "iterations", w, "a count"); it && *it >= 0) f.iterations = static_cast<std::size_t>(*it);
    f.iteration_method = opt_string(*v, "iteration_method", w);
    f.step_confidence = opt_number(*v, "step_confidence", w, "0..1");
    if (auto d = opt_whole(*v, "device", w, "a CUDA device")) f.device = static_cast<int>(*d);
    f.warnings = opt_strings(*v, "warnings", w);
    f.step_evidence = opt_strings(*v, "step_evidence", w);
    f.created = opt_string(*v, "created", w);
    f.gearshift_version = opt_string(*v, "gearshift_version", w);
    p.provenance = std::move(f);
  }
  validate(p, source);
  return p;
}

PlanFile read_plan_file(const std::string& path) {
  std::error_code ec;
  const auto st = std::filesystem::status(path, ec);
  if (ec || !std::filesystem::exists(st)) fail(path, "cannot open: no such file");
  if (std::filesystem::is_directory(st)) fail(path, "is a directory, not a plan file (pass the plan.json inside it)");
  std::ifstream in(path, std::ios::binary);
  if (!in) fail(path, fmt::format("cannot open: {}", std::strerror(errno)));
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  if (in.bad()) fail(path, fmt::format("cannot read: {}", std::strerror(errno)));
  if (text.empty()) fail(path, "empty file (0 bytes): not a plan");
  if (text.size() >= 3 && static_cast<unsigned char>(text[0]) == 0xEF && static_cast<unsigned char>(text[1]) == 0xBB &&
      static_cast<unsigned char>(text[2]) == 0xBF)
    text.erase(0, 3);  // a UTF-8 BOM an editor added
  json j;
  try {
    j = json::parse(text);
  } catch (const json::parse_error& e) {
    fail(path, fmt::format("not valid JSON (byte {}): {}", e.byte,
                           e.byte >= text.size() ? "the file ends in the middle of the JSON (truncated?)"
                                                 : "a syntax error there"));
  }
  return plan_file_from_json(j, path);
}

void write_plan_file(const PlanFile& p, const std::string& path) {
  validate(p, path);
  const std::string text = to_json(p).dump(1) + "\n";
  namespace fs = std::filesystem;
  std::error_code ec;
  if (fs::is_directory(path, ec)) fail(path, "cannot write the plan: it is a directory");
  // A link is followed (the file it names is replaced, not the link); a device or pipe (/dev/stdout) is written
  // directly.
  if (fs::exists(path, ec) && !fs::is_regular_file(path, ec)) {
    std::ofstream out(path, std::ios::binary);
    if (!(out << text) || !out.flush()) fail(path, fmt::format("cannot write the plan: {}", std::strerror(errno)));
    return;
  }
  fs::path target(path);
  if (fs::is_symlink(target, ec)) {
    target = fs::weakly_canonical(target, ec);
    if (ec) fail(path, fmt::format("cannot write the plan: {}", ec.message()));
  }
  const fs::path dir = target.has_parent_path() ? target.parent_path() : fs::path(".");
  if (!fs::is_directory(dir, ec))
    fail(path, fmt::format("cannot write the plan: directory {} does not exist", dir.string()));
  const std::string tmp = fmt::format("{}.tmp-{}", target.string(), ::getpid());
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    if (!out) {
      const int err = errno;
      // A directory we may not create files in, holding a plan we may overwrite: write that file directly.
      if (fs::exists(target, ec) && ::access(target.c_str(), W_OK) == 0) {
        std::ofstream direct(target, std::ios::binary | std::ios::trunc);
        if ((direct << text) && direct.flush()) return;
      }
      fail(path, fmt::format("cannot write the plan: {} (directory {})", std::strerror(err), dir.string()));
    }
    out << text;
    out.flush();
    if (!out) {
      const int err = errno;
      out.close();
      std::remove(tmp.c_str());
      fail(path, fmt::format("cannot write the plan: {}", std::strerror(err)));
    }
  }
  if (std::rename(tmp.c_str(), target.c_str()) != 0) {
    const int err = errno;
    std::remove(tmp.c_str());
    fail(path, fmt::format("cannot write the plan: {}", std::strerror(err)));
  }
}

double position_match_share(const std::vector<std::pair<std::string, trace::OpKind>>& a,
                            const std::vector<std::pair<std::string, trace::OpKind>>& b) {
  const std::size_t longer = std::max(a.size(), b.size());
  if (longer == 0) return 1;
  // Longest common subsequence length, two rows.
  std::vector<std::size_t> prev(b.size() + 1, 0), cur(b.size() + 1, 0);
  for (std::size_t i = 1; i <= a.size(); ++i) {
    for (std::size_t k = 1; k <= b.size(); ++k)
      cur[k] = a[i - 1] == b[k - 1] ? prev[k - 1] + 1 : std::max(prev[k], cur[k - 1]);
    std::swap(prev, cur);
  }
  return static_cast<double>(prev[b.size()]) / static_cast<double>(longer);
}

}  // namespace gearshift::plan
