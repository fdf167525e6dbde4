// What a plan is asked for, read and checked before any trace work: the GPU spec it is made for (from --gpu, the
// trace's device name, or assumed; service/plan_job.hpp's GpuChoice) and the step-time budget (--max-slowdown).
// Apart from plan_job.cpp, which holds the planning itself.
#include <string>
#include <vector>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "gpu/spec.hpp"
#include "service/error.hpp"
#include "service/plan_job.hpp"
#include "sim/measurement.hpp"

namespace gearshift::service {

using Kind = ServiceError::Kind;

std::vector<std::string> spec_names() { return gpu::spec_names(); }

double parse_slowdown(const std::string& text) {
  std::string t = text;
  bool percent = false;
  while (!t.empty() && (t.back() == '%' || t.back() == ' ')) percent |= t.back() == '%', t.pop_back();
  double v = 0;
  try {
    std::size_t used = 0;
    v = std::stod(t, &used);
    if (used != t.size()) throw std::invalid_argument("trailing text");
  } catch (const std::exception&) {
    throw ServiceError(Kind::kBadArgument, fmt::format("--max-slowdown '{}' is not a number; write e.g. 0.5% or 0.005", text));
  }
  if (percent) v /= 100;
  if (!(v >= 0 && v <= 1))
    throw ServiceError(Kind::kBadArgument, fmt::format("--max-slowdown '{}' must lie between 0% and 100%", text));
  return v;
}

std::string slowdown_echo(const std::string& text) {
  if (text.find('%') != std::string::npos) return {};
  double v = 0;
  try {
    v = parse_slowdown(text);
  } catch (const ServiceError&) {
    return {};
  }
  if (v <= 0.10) return {};
  return fmt::format("--max-slowdown {} is read as {:g} % of step time (a fraction without %); did you mean {}%?",
                     text, 100 * v, text);
}

gpu::GpuSpec spec_or_exit(const std::string& name) {
  try {
    return gpu::find_spec(name);
  } catch (const std::invalid_argument& e) {
    throw ServiceError(Kind::kBadArgument, std::string(e.what()) + "; pass one of those with --gpu");
  }
}

std::string GpuChoice::line() const {
  if (source == "assumed") return fmt::format("{} assumed: the trace names no GPU (pass --gpu to plan for another)", spec);
  if (source == "trace") return fmt::format("{}, the GPU the trace names ('{}')", spec, trace_gpu);
  if (trace_gpu.empty()) return fmt::format("{} from --gpu (the trace names no GPU)", spec);
  return fmt::format("{} from --gpu (the trace names '{}', {})", spec, trace_gpu,
                     trace_spec.empty() ? std::string("no known spec") : "spec " + trace_spec);
}

nlohmann::json GpuChoice::to_json() const {
  auto or_null = [](const std::string& v) { return v.empty() ? nlohmann::json(nullptr) : nlohmann::json(v); };
  return {{"spec", spec}, {"source", source}, {"trace_gpu", or_null(trace_gpu)}, {"trace_spec", or_null(trace_spec)}};
}

GpuChoice choose_gpu(const std::optional<std::string>& gpu, const trace::Trace& t, const std::string& display_name) {
  GpuChoice c;
  c.trace_gpu = t.gpu_name;
  std::string other_board;  // why the trace's GPU, though named like one with a spec, has none
  if (!c.trace_gpu.empty()) c.trace_spec = gpu::spec_name_for_device(c.trace_gpu, &other_board);
  if (gpu) {
    c.spec = spec_or_exit(*gpu).name;
    c.source = "--gpu";
  } else if (!c.trace_spec.empty()) {
    c.spec = c.trace_spec;
    c.source = "trace";
  } else if (!c.trace_gpu.empty()) {
    throw ServiceError(Kind::kBadArgument, fmt::format("{}: the trace ran on '{}', which has no GPU spec{} (known: {}); pass --gpu "
                                   "with the spec to plan for",
                                   display_name, c.trace_gpu, other_board.empty() ? "" : " (" + other_board + ")",
                                   fmt::join(gpu::spec_names(), ", ")));
  } else {
    c.spec = "h200";
    c.source = "assumed";
  }
  const gpu::GpuSpec spec = gpu::find_spec(c.spec);
  if (c.source == "--gpu" && !c.trace_spec.empty() && c.trace_spec != c.spec)
    c.warning = fmt::format("the trace names its GPU '{}' (spec {}), but --gpu {} plans it as an {}: the figures "
                            "hold only if --gpu is right",
                            c.trace_gpu, c.trace_spec, c.spec, spec.full_name);
  // A GPU with no spec of its own planned as another (issue 46: it was said only in the GPU line).
  if (c.source == "--gpu" && c.trace_spec.empty() && !c.trace_gpu.empty())
    c.warning = fmt::format("the trace ran on '{}', which has no GPU spec{}; --gpu {} plans it as an {}: its clocks, "
                            "power limits and idle power are that GPU's, and the figures hold only as far as the two "
                            "boards agree",
                            c.trace_gpu, other_board.empty() ? "" : " (" + other_board + ")", c.spec, spec.full_name);
  // A GPU cannot average more than its highest power limit: a trace that did is from another GPU (5 % for
  // sensor noise).
  // The meta's figures only: power samples need the steps (checked again in plan_trace).
  if (auto p = sim::measured_power(t, trace::IterationAnalysis{}); p && p->average_power_w > 1.05 * spec.power_limit_max_w) {
    const double w = p->average_power_w;
    const std::string why = c.source == "--gpu"   ? fmt::format("--gpu {}", c.spec)
                            : c.source == "trace" ? fmt::format("the GPU the trace names, '{}'", c.trace_gpu)
                                                  : std::string("assumed: the trace names no GPU");
    throw ServiceError(Kind::kBadInput, fmt::format("{}: wrong GPU: the trace's measured average power {:.0f} W is above the "
                                      "{:.0f} W maximum power limit of the {} spec ({}), so the trace did not run on "
                                      "an {}; pass --gpu with the GPU it ran on",
                                      display_name, w, spec.power_limit_max_w, c.spec, why, spec.full_name));
  }
  return c;
}

}  // namespace gearshift::service
