#include "cli/report_option.hpp"

#include <unistd.h>

#include <ctime>
#include <filesystem>
#include <fstream>
#include <iterator>

#include <fmt/format.h>

#include "cli/commands.hpp"
#include "report/plan_report.hpp"

namespace gearshift::cli {

using namespace gearshift::service;  // the jobs this face calls

void check_report_path(const std::string& path) {
  namespace fs = std::filesystem;
  std::error_code ec;
  if (fs::is_directory(path, ec))
    throw Exit(kBadInput, fmt::format("--report {}: is a directory; name the report file, e.g. {}/plan.html", path,
                                      path));
  const fs::path p(path);
  const fs::path dir = p.has_parent_path() ? p.parent_path() : fs::path(".");
  if (!fs::is_directory(dir, ec))
    throw Exit(kBadInput, fmt::format("--report {}: cannot write the report: directory {} does not exist", path,
                                      dir.string()));
  if (::access(dir.c_str(), W_OK) != 0 && !(fs::exists(p, ec) && ::access(p.c_str(), W_OK) == 0))
    throw Exit(kBadInput, fmt::format("--report {}: cannot write the report: directory {} is not writable", path,
                                      dir.string()));
  try {
    report::load_chartjs();
  } catch (const report::ReportError& e) {
    throw Exit(kBadInput, fmt::format("--report {}: {}", path, e.what()));
  }
}

std::string own_command_line() {
  std::ifstream f("/proc/self/cmdline", std::ios::binary);
  const std::string raw((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  std::string out, arg;
  auto flush = [&] {
    const bool plain = !arg.empty() && arg.find_first_not_of("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
                                                             "0123456789-_./=:%,+@") == std::string::npos;
    std::string q = arg;
    if (!plain) {
      q = "'";
      for (char c : arg) q += c == '\'' ? std::string("'\\''") : std::string(1, c);
      q += "'";
    }
    out += (out.empty() ? "" : " ") + q;
    arg.clear();
  };
  for (char c : raw) {
    if (c == '\0') flush();
    else arg += c;
  }
  if (!arg.empty()) flush();
  // The executable as the user named it is argv[0]; shown by its file name (paths differ between machines).
  const auto space = out.find(' ');
  const std::string exe = out.substr(0, space);
  return std::filesystem::path(exe).filename().string() + (space == std::string::npos ? "" : out.substr(space));
}

void write_report(const PlanJobOptions& o, const PlanJobResult& r, const std::string& path) {
  std::time_t now = std::time(nullptr);
  char created[32];
  std::strftime(created, sizeof created, "%Y-%m-%dT%H:%M:%SZ", std::gmtime(&now));
  std::string calibration;
  if (r.calibrated_to_w)
    calibration = fmt::format("calibrated to the measured {:.0f} W, from {} (memory/uncore power {:.0f} W at max memory "
                              "clock, activity scale {:.3f}){}",
                              *r.calibrated_to_w, r.calibration_source, r.model->params().memory_w_at_max,
                              r.model->params().activity_scale,
                              r.gemm_clock_source.empty() ? "" : "; GEMMs' capped clock from " + r.gemm_clock_source);
  else
    calibration = r.calibration_source.empty() ? "uncalibrated: the trace has no measured power; class priors as they are"
                                               : r.calibration_source;
  const report::PlanReportInput in{r.trace, r.iterations, r.workload, *r.model, r.evaluation, *r.chosen,
                                   o.display_name, own_command_line(), created, o.max_slowdown, r.gpu.line(),
                                   calibration, r.model_warnings, r.warnings, &r.range,
                                   &r.saving_parts};
  try {
    report::write_plan_report(in, path);
  } catch (const report::ReportError& e) {
    throw Exit(kBadInput, e.what());
  }
}

}  // namespace gearshift::cli
