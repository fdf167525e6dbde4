// plan.json through nlohmann-json's mapping: to_json/from_json per struct (the type macros where the keys are the
// members' names) turn a PlanFile into the file's JSON and back. Hand-written, because the format needs it:
// - check_plan_json, before the mapping reads a file: each field's JSON type, whole numbers, required fields, counts
//   >= 0 and the version, with messages that name the file, the field and its unit (the mapping's own errors name
//   neither, and it would read true as 1 and 1.5 as a clock of 1 MHz);
// - the layout where it is not the plain mapping's: "class" and "graph" for members named otherwise, the clock pair as
//   two keys, variants' ops as objects, and (to_json) absent sections and figures left out rather than null, "" as
//   null in gpu_selection, the "format" tag and "modelled": true;
// - validate: the checks against the GPU's spec and between fields.
// nlohmann::json keeps an object's keys sorted, so the bytes written do not depend on the order of the code.
#include "plan/plan_file.hpp"

#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <span>
#include <system_error>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "gpu/spec.hpp"

// std::optional as plan.json holds it: null when absent. nlohmann-json 3.11 maps no std::optional; a specialisation
// of adl_serializer is its documented way to map a type it does not know.
namespace nlohmann {
template <class T>
struct adl_serializer<std::optional<T>> {
  template <class Json>
  static void to_json(Json& j, const std::optional<T>& v) {
    j = v ? Json(*v) : Json(nullptr);
  }
  template <class Json>
  static void from_json(const Json& j, std::optional<T>& v) {
    v = j.is_null() ? std::nullopt : std::optional<T>(j.template get<T>());
  }
};
}  // namespace nlohmann

namespace gearshift::trace {
// "kind": the op kind's name (trace::to_string). check_plan_json refuses other names before this reads them.
void to_json(nlohmann::json& j, OpKind k) { j = to_string(k); }
void from_json(const nlohmann::json& j, OpKind& k) {
  for (OpKind o : {OpKind::kernel, OpKind::memcpy, OpKind::memset})
    if (j == to_string(o)) k = o;
}
}  // namespace gearshift::trace

namespace gearshift::plan {

using nlohmann::json;

// The structs whose keys are their members' names. The reader's defaults for absent fields are the structs'.
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE_WITH_DEFAULT(PlanFilePredicted, low_confidence, time_s, energy_j, saving_pct,
                                                slowdown_pct, baseline_time_s, baseline_energy_j,
                                                clock_changes_per_step, saving_low_pct, saving_high_pct, time_low_s,
                                                time_high_s, p_over_budget, range_samples)
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE_WITH_DEFAULT(PlanFileModel, formula, coefficients, idle_w_at_min_clock,
                                                idle_w_at_max_clock, v_min_ratio, dynamic_w_at_max, memory_w_at_max,
                                                power_cap_w, activity_scale, knee_mhz, calibrated_to_power_w)
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE_WITH_DEFAULT(PlanFileGpuSelection, spec, source, trace_gpu, trace_spec)
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE_WITH_DEFAULT(PlanFileProvenance, input, format, trace_meta, iterations,
                                                iteration_method, step_confidence, device, warnings, step_evidence,
                                                created, gearshift_version)

// The structs the format lays out otherwise (see the top of this file).
void to_json(json& j, const PlanFilePosition& x) {
  j = {{"name", x.name}, {"kind", x.kind}, {"duration_us", x.duration_us}, {"start_offset_us", x.start_offset_us},
       {"sm_clock_mhz", x.clocks.sm_mhz}, {"mem_clock_mhz", x.clocks.mem_mhz}};
  if (x.stream) j["stream"] = *x.stream;
  if (!x.cls.empty()) j["class"] = x.cls;
  if (!x.pass.empty()) j["pass"] = x.pass;
  if (x.launch_offset_us) j["launch_offset_us"] = *x.launch_offset_us;
  if (x.graph_launch >= 0) {
    j["graph"] = x.graph_id;
    j["graph_launch"] = x.graph_launch;
  }
}
void from_json(const json& j, PlanFilePosition& x) {
  j.at("name").get_to(x.name);
  j.at("kind").get_to(x.kind);
  x.stream = j.value("stream", x.stream);
  x.cls = j.value("class", std::string());
  x.pass = j.value("pass", std::string());
  j.at("duration_us").get_to(x.duration_us);
  j.at("start_offset_us").get_to(x.start_offset_us);
  x.launch_offset_us = j.value("launch_offset_us", x.launch_offset_us);
  x.clocks = {j.at("sm_clock_mhz").get<int>(), j.at("mem_clock_mhz").get<int>()};
  if (j.contains("graph_launch")) {  // "graph" is read only with it (as before: a lone "graph" is ignored)
    j.at("graph_launch").get_to(x.graph_launch);
    j.at("graph").get_to(x.graph_id);
  }
}

void to_json(json& j, const PlanFilePhase& ph) {
  j = {{"first_position", ph.first_position}, {"last_position", ph.last_position}, {"first_op", ph.first_op},
       {"sm_clock_mhz", ph.clocks.sm_mhz}, {"mem_clock_mhz", ph.clocks.mem_mhz}};
}
void from_json(const json& j, PlanFilePhase& ph) {
  j.at("first_position").get_to(ph.first_position);
  j.at("last_position").get_to(ph.last_position);
  ph.first_op = j.value("first_op", std::string());
  ph.clocks = {j.at("sm_clock_mhz").get<int>(), j.at("mem_clock_mhz").get<int>()};
}

// "ops" as a list of {"name", "kind"}; "skip" and "ops" left out when 0 or none.
void to_json(json& j, const PlanFileVariant& v) {
  j = {{"after", v.after}, {"steps", v.steps}};
  if (v.skip > 0) j["skip"] = v.skip;
  for (const auto& [name, kind] : v.ops) j["ops"].push_back({{"name", name}, {"kind", kind}});
}
void from_json(const json& j, PlanFileVariant& v) {
  j.at("after").get_to(v.after);
  v.skip = j.value("skip", std::size_t{0});
  v.steps = j.value("steps", std::size_t{0});
  for (const json& op : j.value("ops", json::array()))
    v.ops.emplace_back(op.at("name").get<std::string>(), op.at("kind").get<trace::OpKind>());
}

NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE_WITH_DEFAULT(PlanFile, version, gpu, gpu_selection, strategy, switch_latency_us,
                                                max_slowdown, period_us, positions, phases, variants, predicted, model,
                                                provenance, rank, deadline_s, straggler_factor)

namespace {

[[noreturn]] void plan_fail(const std::string& where, const std::string& what) {
  throw PlanFileError(where + ": " + what);
}

// A value as the message shows it: its JSON text, shortened.
std::string plan_shown(const json& v) {
  std::string s = v.dump();
  if (s.size() > 40) s = s.substr(0, 37) + "...";
  return s;
}

// What a field of plan.json must hold. number: finite, not a bool; whole: a number without fraction, |n| <= 2e9 (an
// integer, or a float such as 1410.0); strings: a list of strings; objects: a list of objects; op_kind: "kernel",
// "memcpy" or "memset".
enum class PlanJson { number, whole, string, boolean, strings, object, objects, op_kind, any };

struct PlanKey {
  const char* key;
  PlanJson type;
  const char* unit = "";  // the unit, or what the number is, for messages: "not a number (MHz)"
  bool required = false;
  std::span<const PlanKey> fields = {};  // of an object, or of each object of a list
  const char* missing = nullptr;         // the message when a required field is missing, if not the usual one
};

void check_plan_keys(json& obj, std::span<const PlanKey> keys, const std::string& where);

[[noreturn]] void plan_refuse(const json& v, const PlanKey& k, const std::string& where, const char* what) {
  plan_fail(where,
            fmt::format("'{}' is {}, {}{}", k.key, plan_shown(v), what, *k.unit ? fmt::format(" ({})", k.unit) : ""));
}

// The name of an op kind, else nullopt.
std::optional<trace::OpKind> plan_op_kind(const json& v) {
  for (trace::OpKind o : {trace::OpKind::kernel, trace::OpKind::memcpy, trace::OpKind::memset})
    if (v == trace::to_string(o)) return o;
  return std::nullopt;
}

void check_plan_value(json& v, const PlanKey& k, const std::string& where) {
  using enum PlanJson;
  const bool numeric = k.type == number || k.type == whole;
  if (numeric && !v.is_number()) plan_refuse(v, k, where, "not a number");
  if (numeric && !std::isfinite(v.get<double>())) plan_refuse(v, k, where, "not a finite number");
  if (k.type == whole && (v != std::floor(v.get<double>()) || std::fabs(v.get<double>()) > 2e9))
    plan_refuse(v, k, where, "not a whole number");
  if ((k.type == string || k.type == op_kind) && !v.is_string()) plan_refuse(v, k, where, "not a string");
  if (k.type == op_kind && !plan_op_kind(v))
    plan_fail(where, fmt::format("'kind' is {}: kernel, memcpy or memset", plan_shown(v)));
  if (k.type == boolean && !v.is_boolean()) plan_refuse(v, k, where, "not true or false");
  if (k.type == object && !v.is_object()) plan_refuse(v, k, where, "not an object");
  if (k.type == object) check_plan_keys(v, k.fields, fmt::format("{}: {}", where, k.key));
  if ((k.type == strings || k.type == objects) && !v.is_array())
    plan_refuse(v, k, where, k.type == strings ? "not a list of strings" : "not a list");
  for (std::size_t i = 0; (k.type == strings || k.type == objects) && i < v.size(); ++i) {
    const std::string at = fmt::format("{}: {}[{}]", where, k.key, i);
    if (k.type == strings) check_plan_value(v[i], {k.key, string}, at);
    if (k.type == objects) check_plan_keys(v[i], k.fields, at);
  }
}

// Checks the fields `keys` of the object `obj` in order. Those not required that are null are dropped: null reads
// as absent, and the mapping leaves them at the struct's default.
void check_plan_keys(json& obj, std::span<const PlanKey> keys, const std::string& where) {
  if (!obj.is_object()) plan_fail(where, fmt::format("is {}, not an object", plan_shown(obj)));
  for (const PlanKey& k : keys) {
    auto it = obj.find(k.key);
    if (it == obj.end() && k.required)
      plan_fail(where, k.missing != nullptr ? k.missing : fmt::format("missing field '{}'", k.key));
    if (it == obj.end()) continue;
    if (it->is_null() && !k.required && k.type != PlanJson::any)
      obj.erase(it);
    else
      check_plan_value(*it, k, where);
  }
}

// A count or index that must be at least `least` where present; `what` is the message, given the key and value.
void check_plan_least(const json& obj, const char* key, int least, const std::string& where, const char* what) {
  if (obj.contains(key) && obj[key] < least)
    plan_fail(where, fmt::format(fmt::runtime(what), key, obj[key].get<long long>()));
}

// What the mapping cannot check with a message naming the file and field (see the top of the file), on a copy of
// the file's JSON: drops null fields that read as absent.
void check_plan_json(json& j, const std::string& source) {
  using enum PlanJson;
  constexpr bool kRequired = true;
  // plan.json's fields: the JSON each holds, in the order the checks read them.
  // clang-format off
  static constexpr PlanKey kPlanOpKeys[] = {
      {"name", string, "", kRequired},
      {"kind", op_kind, "", kRequired, {},
       "missing field 'kind' (kernel, memcpy or memset; plans from gearshift before issue 14 lacked it in plan-ranks: "
       "make the plan again)"}};
  static constexpr PlanKey kPlanPositionKeys[] = {
      kPlanOpKeys[0], kPlanOpKeys[1], {"stream", whole, "a CUDA stream id"}, {"class", string}, {"pass", string},
      {"duration_us", number, "µs", kRequired}, {"start_offset_us", number, "µs", kRequired},
      {"launch_offset_us", number, "µs"}, {"sm_clock_mhz", whole, "MHz", kRequired},
      {"mem_clock_mhz", whole, "MHz", kRequired}, {"graph_launch", whole, "a graph launch ordinal"}};
  static constexpr PlanKey kPlanGraphKey[] = {{"graph", whole, "a CUDA graph id"}};  // read with 'graph_launch' only
  static constexpr PlanKey kPlanPhaseKeys[] = {
      {"first_position", whole, "a position index", kRequired}, {"last_position", whole, "a position index", kRequired},
      {"first_op", string}, {"sm_clock_mhz", whole, "MHz", kRequired}, {"mem_clock_mhz", whole, "MHz", kRequired}};
  static constexpr PlanKey kPlanVariantKeys[] = {
      {"after", whole, "a position index, -1: before the first", kRequired}, {"skip", whole, "a count"},
      {"steps", whole, "a count"}, {"ops", objects, "", false, kPlanOpKeys}};
  static constexpr PlanKey kPlanGpuSelectionKeys[] = {
      {"spec", string}, {"source", string}, {"trace_gpu", string}, {"trace_spec", string}};
  static constexpr PlanKey kPlanPredictedKeys[] = {
      {"modelled", boolean}, {"low_confidence", boolean}, {"time_s", number, "s"}, {"energy_j", number, "J"},
      {"saving_pct", number, "%"}, {"slowdown_pct", number, "%"}, {"baseline_time_s", number, "s"},
      {"baseline_energy_j", number, "J"}, {"clock_changes_per_step", whole, "a count"}, {"saving_low_pct", number, "%"},
      {"saving_high_pct", number, "%"}, {"time_low_s", number, "s"}, {"time_high_s", number, "s"},
      {"p_over_budget", number, "a probability"}, {"range_samples", whole, "a count"}};
  static constexpr PlanKey kPlanModelKeys[] = {
      {"formula", string}, {"coefficients", string}, {"idle_w_at_min_clock", number, "W"},
      {"idle_w_at_max_clock", number, "W"}, {"knee_mhz", whole, "MHz"}, {"v_min_ratio", number, "a ratio"},
      {"dynamic_w_at_max", number, "W"}, {"memory_w_at_max", number, "W"}, {"power_cap_w", number, "W"},
      {"activity_scale", number, "a factor"}, {"calibrated_to_power_w", number, "W"}};
  static constexpr PlanKey kPlanProvenanceKeys[] = {
      {"input", string}, {"format", string}, {"trace_meta", any}, {"iterations", whole, "a count"},
      {"iteration_method", string}, {"step_confidence", number, "0..1"}, {"device", whole, "a CUDA device"},
      {"warnings", strings}, {"step_evidence", strings}, {"created", string}, {"gearshift_version", string}};
  static constexpr PlanKey kPlanKeys[] = {
      {"gpu", string, "", kRequired}, {"gpu_selection", object, "", false, kPlanGpuSelectionKeys},
      {"strategy", string}, {"switch_latency_us", number, "µs", kRequired}, {"max_slowdown", number, "a fraction"},
      {"period_us", number, "µs", kRequired}, {"rank", whole, "a rank"}, {"deadline_s", number, "s"},
      {"straggler_factor", number, "a factor"},
      {"positions", objects, "", kRequired, kPlanPositionKeys,
       "no 'positions': a plan needs the clocks of each template position"},
      {"phases", objects, "", false, kPlanPhaseKeys}, {"variants", objects, "", false, kPlanVariantKeys},
      {"predicted", object, "", false, kPlanPredictedKeys}, {"model", object, "", false, kPlanModelKeys},
      {"provenance", object, "", false, kPlanProvenanceKeys}};
  // clang-format on
  if (!j.is_object())
    plan_fail(source, fmt::format("not a gearshift plan: the JSON is {}, not an object", j.type_name()));
  if (!j.contains("format"))
    plan_fail(source, "not a gearshift plan: no 'format' field (a plan has \"format\": \"gearshift-plan\")");
  if (j["format"] != kPlanFormat)
    plan_fail(source,
              fmt::format("not a gearshift plan: 'format' is {}, not \"{}\"", plan_shown(j["format"]), kPlanFormat));
  // The version first: a newer plan may hold fields this gearshift does not know.
  constexpr PlanKey kVersion[] = {{"version", whole, "the plan format's version", kRequired}};
  check_plan_keys(j, kVersion, source);
  if (j["version"] > kPlanFileVersion)
    plan_fail(source, fmt::format("plan version {} is newer than this gearshift reads ({}): update gearshift, or make "
                                  "the plan again with this one",
                                  j["version"].get<long long>(), kPlanFileVersion));
  if (j["version"] < 1)
    plan_fail(source, fmt::format("'version' is {}: plan versions start at 1", j["version"].get<long long>()));
  check_plan_keys(j, kPlanKeys, source);

  // The ranges and the fields that depend on others.
  if (j["positions"].empty()) plan_fail(source, "'positions' is empty: a plan needs at least one template position");
  for (std::size_t i = 0; i < j["positions"].size(); ++i) {
    json& e = j["positions"][i];
    const std::string where = fmt::format("{}: positions[{}]", source, i);
    if (!e.contains("graph_launch")) continue;
    check_plan_keys(e, kPlanGraphKey, where);
    if (!e.contains("graph") || e["graph"] <= 0) plan_fail(where, "'graph_launch' needs 'graph', a CUDA graph id > 0");
  }
  for (std::size_t k = 0; j.contains("phases") && k < j["phases"].size(); ++k)
    for (const char* key : {"first_position", "last_position"})
      check_plan_least(j["phases"][k], key, 0, fmt::format("{}: phases[{}]", source, k),
                       "'{}' is {}: position indices start at 0");
  for (std::size_t k = 0; j.contains("variants") && k < j["variants"].size(); ++k)
    for (const char* key : {"skip", "steps"})
      check_plan_least(j["variants"][k], key, 0, fmt::format("{}: variants[{}]", source, k),
                       "'{}' is {}: a count is >= 0");
  if (j.contains("predicted")) {
    const json& e = j["predicted"];
    const std::string where = source + ": predicted";
    if (e.value("modelled", true) == false)
      plan_fail(where, "'modelled' is false: a plan's predicted figures are modelled");
    check_plan_least(e, "clock_changes_per_step", 0, where, "'{}' is negative");
    if (e.contains("p_over_budget") && !(e["p_over_budget"] >= 0 && e["p_over_budget"] <= 1))
      plan_fail(where, "'p_over_budget' must lie in [0, 1]");
    check_plan_least(e, "range_samples", 1, where, "'{}' must be > 0");
  }
  // A negative count of iterations has always read as unknown (absent), not as an error.
  if (j.contains("provenance") && j["provenance"].value("iterations", 0) < 0) j["provenance"].erase("iterations");
}

std::string spec_clocks_text(const gpu::GpuSpec& s) {
  return fmt::format("SM {}-{} MHz, memory {} MHz", s.min_sm_clock_mhz(), s.max_sm_clock_mhz(),
                     fmt::join(s.mem_clocks_mhz, "/"));
}

bool spec_can_set(const gpu::GpuSpec& s, const model::ClockPair& c) {
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
  json j = p;
  // Absent sections and figures are left out (the mapping writes null), and so are no variants; the GPU selection
  // writes "" as null; the tags say what the file is.
  auto drop_nulls = [](json& obj) {
    for (auto it = obj.begin(); it != obj.end();) it = it->is_null() ? obj.erase(it) : std::next(it);
  };
  drop_nulls(j);
  if (p.variants.empty()) j.erase("variants");
  for (const char* k : {"trace_gpu", "trace_spec"})
    if (p.gpu_selection && j["gpu_selection"][k] == "") j["gpu_selection"][k] = nullptr;
  if (p.predicted) {
    drop_nulls(j["predicted"]);
    j["predicted"]["modelled"] = true;
  }
  j["format"] = kPlanFormat;
  return j;
}

void validate(const PlanFile& p, const std::string& source) {
  if (p.version < 1 || p.version > kPlanFileVersion)
    plan_fail(source, fmt::format("plan version {} is not one this gearshift reads (1-{}): make the plan again with "
                             "this gearshift, or update gearshift",
                             p.version, kPlanFileVersion));
  gpu::GpuSpec spec;
  try {
    spec = gpu::find_spec(p.gpu);
  } catch (const std::invalid_argument& e) {
    plan_fail(source, fmt::format("'gpu' is \"{}\", a GPU without a spec: {}", p.gpu, e.what()));
  }
  if (!(p.period_us > 0) || !std::isfinite(p.period_us))
    plan_fail(source, fmt::format("'period_us' is {}: the step time must be > 0 µs", p.period_us));
  // At most a minute: a Hopper clock change takes milliseconds, and replay steps through the latency in virtual
  // time (3e11 µs ran past 30 s).
  if (!(p.switch_latency_us >= 0) || !std::isfinite(p.switch_latency_us) || p.switch_latency_us > 6e7)
    plan_fail(source, fmt::format("'switch_latency_us' is {}: the switch latency must be in [0, 60,000,000] µs (a minute)",
                             p.switch_latency_us));
  if (p.max_slowdown && !(*p.max_slowdown >= 0 && *p.max_slowdown <= 1))
    plan_fail(source, fmt::format("'max_slowdown' is {}: a fraction in [0, 1] (0.005 is 0.5 %)", *p.max_slowdown));
  if (p.positions.empty()) plan_fail(source, "'positions' is empty: a plan needs at least one template position");
  for (std::size_t i = 0; i < p.positions.size(); ++i) {
    const auto& x = p.positions[i];
    const std::string where = fmt::format("{}: positions[{}]", source, i);
    if (!(x.duration_us >= 0) || !std::isfinite(x.duration_us))
      plan_fail(where, fmt::format("'duration_us' is {}: must be >= 0 µs", x.duration_us));
    if (!std::isfinite(x.start_offset_us)) plan_fail(where, "'start_offset_us' is not a finite number (µs)");
    if (!spec_can_set(spec, x.clocks))
      plan_fail(where, fmt::format("SM {} MHz, memory {} MHz is not a clock pair of its GPU '{}' ({}): see `gearshift gpus "
                              "--spec {}`",
                              x.clocks.sm_mhz, x.clocks.mem_mhz, p.gpu, spec_clocks_text(spec), spec.name));
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
      plan_fail(where, fmt::format("graph launch {} is graph {} at positions[{}] but graph {} here", x.graph_launch,
                              first.graph_id, it->second, x.graph_id));
    if (!(first.clocks == x.clocks))
      plan_fail(where, fmt::format("a clock change inside CUDA graph launch {} (positions[{}] wants SM {} MHz, memory {} "
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
      plan_fail(where, fmt::format("'after' is {}, out of range: the plan has {} positions (-1 to {})", v.after, n, n - 1));
    if (v.ops.empty() && v.skip == 0)
      plan_fail(where, "a variant inserts ops ('ops', not empty), leaves positions out ('skip' > 0), or both; this one does "
                  "neither");
    if (v.after + static_cast<std::int64_t>(v.skip) >= static_cast<std::int64_t>(n))
      plan_fail(where, fmt::format("'skip' {} after position {} runs past the plan's {} positions", v.skip, v.after, n));
  }
  for (std::size_t k = 0; k < p.phases.size(); ++k) {
    const auto& ph = p.phases[k];
    const std::string where = fmt::format("{}: phases[{}]", source, k);
    for (auto [key, v] : {std::pair{"first_position", ph.first_position}, std::pair{"last_position", ph.last_position}})
      if (v >= n)
        plan_fail(where, fmt::format("'{}' is {}, out of range: the plan has {} positions (0-{})", key, v, n, n - 1));
    if (ph.first_position > ph.last_position)
      plan_fail(where, fmt::format("'first_position' {} is after 'last_position' {}", ph.first_position, ph.last_position));
    if (k > 0) {
      const auto& prev = p.phases[k - 1];
      if (ph.first_position < prev.first_position)
        plan_fail(where, fmt::format("positions {}-{} come before phases[{}] ({}-{}): phases must be in position order",
                                ph.first_position, ph.last_position, k - 1, prev.first_position, prev.last_position));
      if (ph.first_position <= prev.last_position)
        plan_fail(where, fmt::format("positions {}-{} overlap phases[{}] ({}-{})", ph.first_position, ph.last_position,
                                k - 1, prev.first_position, prev.last_position));
    }
    if (!spec_can_set(spec, ph.clocks))
      plan_fail(where, fmt::format("SM {} MHz, memory {} MHz is not a clock pair of its GPU '{}' ({}): see `gearshift gpus "
                              "--spec {}`",
                              ph.clocks.sm_mhz, ph.clocks.mem_mhz, p.gpu, spec_clocks_text(spec), spec.name));
    for (std::size_t i = ph.first_position; i <= ph.last_position; ++i)
      if (!(p.positions[i].clocks == ph.clocks))
        plan_fail(where, fmt::format("SM {} MHz, memory {} MHz, but positions[{}] inside it has SM {} MHz, memory {} MHz: "
                                "phases and positions disagree",
                                ph.clocks.sm_mhz, ph.clocks.mem_mhz, i, p.positions[i].clocks.sm_mhz,
                                p.positions[i].clocks.mem_mhz));
  }
}

PlanFile plan_file_from_json(const json& j, const std::string& source) {
  json checked = j;
  check_plan_json(checked, source);
  PlanFile p;
  try {
    checked.get_to(p);
  } catch (const json::exception& e) {  // not expected after the checks; a message rather than a crash
    plan_fail(source, fmt::format("cannot read the plan: {}", e.what()));
  }
  validate(p, source);
  return p;
}

PlanFile read_plan_file(const std::string& path) {
  std::error_code ec;
  const auto st = std::filesystem::status(path, ec);
  if (ec || !std::filesystem::exists(st)) plan_fail(path, "cannot open: no such file");
  if (std::filesystem::is_directory(st)) plan_fail(path, "is a directory, not a plan file (pass the plan.json inside it)");
  std::ifstream in(path, std::ios::binary);
  if (!in) plan_fail(path, fmt::format("cannot open: {}", std::strerror(errno)));
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  if (in.bad()) plan_fail(path, fmt::format("cannot read: {}", std::strerror(errno)));
  if (text.empty()) plan_fail(path, "empty file (0 bytes): not a plan");
  if (text.size() >= 3 && static_cast<unsigned char>(text[0]) == 0xEF && static_cast<unsigned char>(text[1]) == 0xBB &&
      static_cast<unsigned char>(text[2]) == 0xBF)
    text.erase(0, 3);  // a UTF-8 BOM an editor added
  json j;
  try {
    j = json::parse(text);
  } catch (const json::parse_error& e) {
    plan_fail(path, fmt::format("not valid JSON (byte {}): {}", e.byte,
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
  if (fs::is_directory(path, ec)) plan_fail(path, "cannot write the plan: it is a directory");
  // A link is followed (the file it names is replaced, not the link); a device or pipe (/dev/stdout) is written
  // directly.
  if (fs::exists(path, ec) && !fs::is_regular_file(path, ec)) {
    std::ofstream out(path, std::ios::binary);
    if (!(out << text) || !out.flush()) plan_fail(path, fmt::format("cannot write the plan: {}", std::strerror(errno)));
    return;
  }
  fs::path target(path);
  if (fs::is_symlink(target, ec)) {
    target = fs::weakly_canonical(target, ec);
    if (ec) plan_fail(path, fmt::format("cannot write the plan: {}", ec.message()));
  }
  const fs::path dir = target.has_parent_path() ? target.parent_path() : fs::path(".");
  if (!fs::is_directory(dir, ec))
    plan_fail(path, fmt::format("cannot write the plan: directory {} does not exist", dir.string()));
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
      plan_fail(path, fmt::format("cannot write the plan: {} (directory {})", std::strerror(err), dir.string()));
    }
    out << text;
    out.flush();
    if (!out) {
      const int err = errno;
      out.close();
      std::remove(tmp.c_str());
      plan_fail(path, fmt::format("cannot write the plan: {}", std::strerror(err)));
    }
  }
  if (std::rename(tmp.c_str(), target.c_str()) != 0) {
    const int err = errno;
    std::remove(tmp.c_str());
    plan_fail(path, fmt::format("cannot write the plan: {}", std::strerror(err)));
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
