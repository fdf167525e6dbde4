#include "report/plan_report.hpp"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "gearshift/version.hpp"
#include "model/kernel_class.hpp"
#include "plan/schedule.hpp"
#include "sim/simulator.hpp"

#ifndef GEARSHIFT_CHARTJS_PATH
#define GEARSHIFT_CHARTJS_PATH "/usr/share/javascript/chart.js/chart.min.js"
#endif

namespace gearshift::embedded {
extern const unsigned char report_page[];
extern const std::size_t report_page_size;
}  // namespace gearshift::embedded

namespace gearshift::report {
namespace {

using json = nlohmann::json;

constexpr double kUs = 1e-3;  // ns -> µs

std::string latency_label(double ns) {
  const double us = ns / 1e3;
  if (us == 0) return "0";
  if (us < 1000) return fmt::format("{:g} µs", us);
  return fmt::format("{:g} ms", us / 1000);
}

std::string strategy_label(const sim::StrategyResult& s) {
  return s.schedule.strategy == plan::Strategy::phase ? fmt::format("phase (L = {})", latency_label(s.switch_latency_ns))
                                                      : std::string(plan::to_string(s.schedule.strategy));
}

// A regular step of the analysed device, the middle one: the step whose measured samples the timeline shows.
const trace::Iteration* sample_step(const trace::IterationAnalysis& a) {
  std::vector<const trace::Iteration*> regular;
  for (const auto& it : a.iterations)
    if (it.regular && it.excluded.empty()) regular.push_back(&it);
  return regular.empty() ? nullptr : regular[regular.size() / 2];
}

json timeline_data(const PlanReportInput& in) {
  const auto& w = in.workload;
  const auto& clocks = in.chosen.schedule.clocks;
  std::vector<std::int32_t> streams;
  std::vector<std::string> classes, names;
  std::map<std::string, std::size_t> name_index;
  auto index_of = [](auto& v, const auto& x) {
    auto it = std::find(v.begin(), v.end(), x);
    if (it != v.end()) return static_cast<std::size_t>(it - v.begin());
    v.push_back(x);
    return v.size() - 1;
  };
  json ops = json::array();
  for (std::size_t i = 0; i < w.ops.size(); ++i) {
    const auto& op = w.ops[i];
    auto [it, fresh] = name_index.try_emplace(op.name, names.size());
    if (fresh) names.push_back(op.name);
    // [stream index, start µs, duration µs, class index, name index]: measured means over the regular steps.
    ops.push_back({index_of(streams, op.stream), std::round(op.start_offset_ns) * kUs, std::round(op.ref_time_ns) * kUs,
                   index_of(classes, std::string(model::to_string(op.cls))), it->second});
  }
  // The plan's requested clocks from each change's position on (its first point: position 0's clocks).
  json sm = json::array(), mem = json::array();
  for (std::size_t i = 0; i < clocks.size(); ++i) {
    if (i > 0 && clocks[i] == clocks[i - 1]) continue;
    const double t = std::round(w.ops[i].start_offset_ns) * kUs;
    sm.push_back({t, clocks[i].sm_mhz});
    mem.push_back({t, clocks[i].mem_mhz});
  }
  const double end_us = w.period_ns * kUs;
  if (!clocks.empty()) {
    sm.push_back({end_us, clocks.back().sm_mhz});
    mem.push_back({end_us, clocks.back().mem_mhz});
  }
  json j = {{"period_us", end_us},
            {"steps", in.iterations.regular_count()},
            {"streams", streams},
            {"classes", classes},
            {"names", names},
            {"ops", ops},
            {"planned", {{"sm_mhz", sm}, {"mem_mhz", mem}}},
            {"default_sm_mhz", in.model.spec().default_sm_clock_mhz},
            {"default_mem_mhz", in.model.spec().default_mem_clock_mhz}};
  // Measured: the clock and power samples of one real step, else the SM clock each kernel was sampled at.
  json measured = json::object();
  if (const trace::Iteration* step = sample_step(in.iterations)) {
    json msm = json::array(), mmem = json::array(), mpow = json::array();
    for (const auto& s : in.trace.samples) {
      if (s.device != in.iterations.device || s.time_ns < step->start_ns ||
          s.time_ns > step->start_ns + static_cast<std::int64_t>(w.period_ns))
        continue;
      const double t = static_cast<double>(s.time_ns - step->start_ns) * kUs;
      if (s.sm_clock_mhz > 0) msm.push_back({t, s.sm_clock_mhz});
      if (s.mem_clock_mhz > 0) mmem.push_back({t, s.mem_clock_mhz});
      if (s.power_mw >= 0) mpow.push_back({t, s.power_mw / 1000.0});
    }
    if (!msm.empty() || !mmem.empty() || !mpow.empty()) {
      const auto index = static_cast<std::size_t>(step - in.iterations.iterations.data());
      measured = {{"source", fmt::format("clock and power samples of step {} of {} (measured)", index + 1,
                                         in.iterations.iterations.size())},
                  {"sm_mhz", msm}, {"mem_mhz", mmem}, {"power_w", mpow}};
    }
  }
  if (measured.empty()) {
    json msm = json::array();
    for (const auto& op : w.ops)
      if (op.ref_sampled) msm.push_back({std::round(op.start_offset_ns) * kUs, op.ref.sm_mhz});
    if (!msm.empty())
      measured = {{"source", "the SM clock sampled while each kernel ran (measured)"}, {"sm_mhz", msm},
                  {"mem_mhz", json::array()}, {"power_w", json::array()}};
  }
  j["measured"] = measured.empty() ? json(nullptr) : measured;
  return j;
}

// Energy per kernel class of one schedule, J per step (modelled): each kernel's power above the board's idle
// power times its time, summed by class; the board's idle power over the whole step is its own entry, so that
// the entries add up to the simulator's energy.
std::map<std::string, double> energy_by_class(const PlanReportInput& in, const plan::Schedule& s, double latency_ns,
                                              double expected_j) {
  const sim::SimResult r = sim::simulate(in.workload, in.model, s, latency_ns, /*keep_timeline=*/true);
  // The same simulation as the evaluation's: a different total would be a report of another plan.
  if (std::abs(r.energy_j - expected_j) > 1e-9 * std::max(1.0, std::abs(expected_j)))
    throw std::logic_error(fmt::format("the report's {} plan simulates to {} J, the evaluation said {} J",
                                       plan::to_string(s.strategy), r.energy_j, expected_j));
  std::map<std::string, double> by;
  double dynamic = 0;
  for (const auto& e : r.timeline) {
    const auto& op = in.workload.ops[e.position];
    const auto p = model::predict_op(in.model, op, e.requested);
    const double j = (p.power_w - p.idle_power_w) * p.time_ns * 1e-9;
    by[model::to_string(op.cls)] += j;
    dynamic += j;
  }
  by["idle (board)"] = r.energy_j - dynamic;
  return by;
}

json energy_data(const PlanReportInput& in) {
  const plan::Schedule base = sim::default_schedule(in.workload, in.model);
  const auto b = energy_by_class(in, base, 0, in.evaluation.baseline.energy_j);
  const auto p = energy_by_class(in, in.chosen.schedule, in.chosen.switch_latency_ns, in.chosen.sim.energy_j);
  json classes = json::array(), bj = json::array(), pj = json::array();
  // Largest baseline class first; the idle entry last.
  std::vector<std::pair<std::string, double>> order(b.begin(), b.end());
  std::sort(order.begin(), order.end(), [](const auto& x, const auto& y) {
    if ((x.first == "idle (board)") != (y.first == "idle (board)")) return y.first == "idle (board)";
    return x.second > y.second;
  });
  for (const auto& [cls, j] : order) {
    classes.push_back(cls);
    bj.push_back(j);
    pj.push_back(p.count(cls) ? p.at(cls) : 0.0);
  }
  return {{"classes", classes}, {"baseline_j", bj}, {"plan_j", pj}, {"plan", strategy_label(in.chosen)}};
}

// The sentence saying the expected saving lies outside its range (sim::expected_outside_range); null where it does not.
json outside_range(const sim::SavingRange* g) {
  const std::string outside = g == nullptr ? std::string() : sim::expected_outside_range(*g);
  return outside.empty() ? json(nullptr) : json(outside);
}

json strategy_row(const sim::StrategyResult& s) {
  return {{"label", strategy_label(s)},
          {"name", plan::to_string(s.schedule.strategy)},
          {"switch_latency_us", s.switch_latency_ns * kUs},
          {"time_s", s.sim.step_time_ns * 1e-9},
          {"energy_j", s.sim.energy_j},
          {"saving_pct", s.saving_pct},
          {"slowdown_pct", s.slowdown_pct},
          {"clock_changes", s.sim.clock_changes},
          {"within_budget", s.within_budget}};
}

json frontier_data(const sim::Evaluation& e) {
  json budgets = json::array(), series = json::array();
  if (e.frontier.empty()) return {{"budgets_pct", budgets}, {"series", series}};
  for (const auto& p : e.frontier) budgets.push_back(p.max_slowdown * 100);
  for (std::size_t k = 0; k < e.frontier.front().strategies.size(); ++k) {
    json saving = json::array();
    for (const auto& p : e.frontier) {
      const auto& s = p.strategies.at(k);
      saving.push_back(s.within_budget ? json(s.saving_pct) : json(nullptr));  // null: no plan fits
    }
    series.push_back({{"label", strategy_label(e.frontier.front().strategies[k])}, {"saving_pct", saving}});
  }
  return {{"budgets_pct", budgets}, {"series", series}, {"switch_latency_us", e.frontier_latency_ns * kUs}};
}

json latency_data(const sim::Evaluation& e) {
  std::vector<const sim::StrategyResult*> phase;
  const sim::StrategyResult* ideal = nullptr;
  for (const auto& s : e.strategies) {
    if (s.schedule.strategy == plan::Strategy::phase) phase.push_back(&s);
    if (s.schedule.strategy == plan::Strategy::kernel_global) ideal = &s;
  }
  std::sort(phase.begin(), phase.end(),
            [](const auto* a, const auto* b) { return a->switch_latency_ns < b->switch_latency_ns; });
  json labels = json::array(), saving = json::array(), slowdown = json::array(), changes = json::array();
  for (const auto* s : phase) {
    labels.push_back(latency_label(s->switch_latency_ns));
    saving.push_back(s->within_budget ? json(s->saving_pct) : json(nullptr));
    slowdown.push_back(s->slowdown_pct);
    changes.push_back(s->sim.clock_changes);
  }
  return {{"labels", labels}, {"saving_pct", saving}, {"slowdown_pct", slowdown}, {"clock_changes", changes},
          {"kernel_global_pct", ideal && ideal->within_budget ? json(ideal->saving_pct) : json(nullptr)}};
}

// "</" would end the inline <script>: written as "<\/", the same string to JSON and to JavaScript.
std::string script_safe(std::string s) {
  for (std::size_t at = 0; (at = s.find("</", at)) != std::string::npos; at += 3) s.replace(at, 2, "<\\/");
  return s;
}

std::string read_file(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  std::ostringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

}  // namespace

json plan_report_data(const PlanReportInput& in) {
  const auto& spec = in.model.spec();
  const auto& it = in.iterations;
  json strategies = json::array();
  for (const auto& s : in.evaluation.strategies) strategies.push_back(strategy_row(s));
  json measured = json::object();
  if (in.trace.measured.step_time_s) measured["time_s"] = *in.trace.measured.step_time_s;
  if (in.trace.measured.energy_per_step_j) measured["energy_j"] = *in.trace.measured.energy_per_step_j;
  if (in.trace.measured.average_power_w) measured["average_power_w"] = *in.trace.measured.average_power_w;
  json meta = json::parse(in.trace.meta_json, nullptr, false);
  const auto& b = in.evaluation.baseline;
  return {
      {"input", in.input},
      {"gpu", {{"spec", spec.name}, {"full_name", spec.full_name}, {"line", in.gpu_line}}},
      {"budget_pct", in.max_slowdown * 100},
      {"chosen", strategy_row(in.chosen)},
      {"saving_range", in.range == nullptr
                           ? json(nullptr)
                           : json{{"samples", in.range->samples},
                                  {"low_quantile", in.range->low_quantile},
                                  {"high_quantile", in.range->high_quantile},
                                  {"saving_low_pct", in.range->saving_low_pct},
                                  {"saving_expected_pct", in.range->saving_expected_pct},
                                  {"saving_high_pct", in.range->saving_high_pct},
                                  {"time_low_s", in.range->time_low_ns * 1e-9},
                                  {"time_expected_s", in.range->time_expected_ns * 1e-9},
                                  {"time_high_s", in.range->time_high_ns * 1e-9},
                                  {"slowdown_low_pct", in.range->slowdown_low_pct},
                                  {"slowdown_high_pct", in.range->slowdown_high_pct},
                                  {"p_over_budget", in.range->p_over_budget},
                                  {"saving_median_pct", in.range->saving_median_pct},
                                  {"expected_outside_range", outside_range(in.range)}}},
      {"saving_parts", in.parts == nullptr ? json(nullptr) : in.parts->to_json()},
      {"baseline",
       {{"time_s", b.step_time_ns * 1e-9},
        {"energy_j", b.energy_j},
        {"average_power_w", b.average_power_w},
        {"sm_mhz", spec.default_sm_clock_mhz},
        {"mem_mhz", spec.default_mem_clock_mhz}}},
      {"measured", measured},
      {"timeline", timeline_data(in)},
      {"energy_by_class", energy_data(in)},
      {"strategies", strategies},
      {"frontier", frontier_data(in.evaluation)},
      {"latency", latency_data(in.evaluation)},
      {"evidence",
       {{"step",
         {{"method", it.method},
          {"steps", it.iterations.size()},
          {"regular_steps", it.regular_count()},
          {"confidence", it.confidence},
          {"period_ms", it.tmpl.period_ns / 1e6},
          {"kernels", it.tmpl.kernels},
          {"device", it.device},
          {"lines", it.evidence.lines}}},
        {"gpu", in.gpu_line},
        {"calibration", in.calibration},
        {"model_warnings", in.model_warnings},
        {"warnings", in.warnings}}},
      {"provenance",
       {{"input", in.input},
        {"format", in.trace.format},
        {"trace_gpu", in.trace.gpu_name},
        {"trace_meta", meta.is_discarded() ? json(nullptr) : meta},
        {"created", in.created_utc},
        {"command", in.command_line},
        {"gearshift_version", kVersion}}},
  };
}

std::string plan_report_html(const PlanReportInput& in, const std::string& chartjs) {
  std::string page(reinterpret_cast<const char*>(embedded::report_page), embedded::report_page_size);
  // nlohmann::json dumps invalid UTF-8 in kernel names as U+FFFD rather than throwing.
  const std::string data =
      script_safe(plan_report_data(in).dump(-1, ' ', false, json::error_handler_t::replace));
  auto put = [&page](const std::string& mark, const std::string& text) {
    const auto at = page.find(mark);
    if (at == std::string::npos) throw std::logic_error("the report page lacks " + mark);
    page.replace(at, mark.size(), text);
  };
  put("@GEARSHIFT_DATA@", data);  // the data first: Chart.js's text is never searched for a mark
  put("@GEARSHIFT_CHARTJS@", script_safe(chartjs));
  return page;
}

std::string load_chartjs() {
  namespace fs = std::filesystem;
  std::vector<std::string> tried;
  std::string path;
  if (const char* env = std::getenv("GEARSHIFT_CHARTJS"); env != nullptr && *env != '\0') {
    path = env;
    if (!fs::is_regular_file(path))
      throw ReportError(fmt::format("GEARSHIFT_CHARTJS={}: no such file (it names Chart.js's UMD build, e.g. "
                                    "/usr/share/javascript/chart.js/chart.min.js)",
                                    path));
  } else {
    const fs::path built(GEARSHIFT_CHARTJS_PATH);
    for (const fs::path& p : {built, built.parent_path() / "chart.umd.js", built.parent_path() / "chart.js",
                              fs::path("/usr/share/javascript/chart.js/chart.min.js"),
                              fs::path("/usr/share/javascript/chart.js/chart.umd.js")}) {
      if (std::find(tried.begin(), tried.end(), p.string()) != tried.end()) continue;
      tried.push_back(p.string());
      std::error_code ec;
      if (fs::is_regular_file(p, ec)) {
        path = p.string();
        break;
      }
    }
    if (path.empty())
      throw ReportError(fmt::format("no Chart.js for the report (tried {}): install Debian's libjs-chart.js "
                                    "(apt-get install libjs-chart.js) or set GEARSHIFT_CHARTJS to its chart.min.js",
                                    fmt::join(tried, ", ")));
  }
  std::string js = read_file(path);
  // The page needs the UMD build (a global `Chart`); the ES module build (chart.esm.js) defines none.
  if (js.find("Chart.js v") == std::string::npos || js.find("Chart") == std::string::npos ||
      js.find("export{") != std::string::npos || js.find("export {") != std::string::npos)
    throw ReportError(fmt::format("{}: not Chart.js's UMD build (chart.min.js / chart.umd.js, with its "
                                  "'Chart.js v' banner)",
                                  path));
  return js;
}

void write_plan_report(const PlanReportInput& in, const std::string& path) {
  const std::string html = plan_report_html(in, load_chartjs());
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  if (!f) throw ReportError(fmt::format("--report {}: cannot open for writing", path));
  f.write(html.data(), static_cast<std::streamsize>(html.size()));
  f.close();
  if (!f) throw ReportError(fmt::format("--report {}: write failed (disk full?)", path));
}

}  // namespace gearshift::report
