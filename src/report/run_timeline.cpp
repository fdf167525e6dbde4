#include "report/run_timeline.hpp"

#include <algorithm>
#include <cstdlib>
#include <filesystem>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "report/trace_events.hpp"
#include "trace/error.hpp"
#include "trace/gearshift_format.hpp"

namespace gearshift::report {

std::vector<std::string> write_run_timeline(const std::string& path, const std::vector<runtime::ClockChange>& changes,
                                            unsigned gpu, const std::string& trace_path,
                                            const std::optional<ClockAnchor>& anchor,
                                            const std::vector<std::pair<std::int64_t, double>>& verify_arms) {
  std::vector<std::string> notes;
  report::TimelineContent c;
  const auto pid = static_cast<std::int64_t>(gpu);
  const std::string row = fmt::format("GPU {} intended clocks", gpu);
  report::CounterTrack sm{"intended SM clock (MHz)", pid, row, {}}, mem{"intended memory clock (MHz)", pid, row, {}},
      locked{"clocks locked (1) or default (0)", pid, row, {}};
  // A change serves its boundary (the GPU time its kernel starts, estimated); a return to default clocks has
  // none and is placed where it was issued. At default clocks the GPU picks its own: no MHz point then.
  auto by_time = [](const runtime::ClockChange& a, const runtime::ClockChange& b) {
    return (a.boundary_ns > 0 ? a.boundary_ns : a.issue_ns) < (b.boundary_ns > 0 ? b.boundary_ns : b.issue_ns);
  };
  std::vector<runtime::ClockChange> sorted = changes;
  std::stable_sort(sorted.begin(), sorted.end(), by_time);
  for (const auto& ch : sorted) {
    const std::int64_t at = ch.boundary_ns > 0 ? ch.boundary_ns : ch.issue_ns;
    locked.points.push_back({at, ch.is_default ? 0.0 : 1.0});
    if (ch.is_default) continue;
    sm.points.push_back({at, static_cast<double>(ch.clocks.sm_mhz)});
    mem.points.push_back({at, static_cast<double>(ch.clocks.mem_mhz)});
  }
  if (!locked.points.empty()) c.counters = {sm, mem, locked};
  else notes.push_back("no clock change was intended (no plan ran): the timeline has no clock track");
  if (!verify_arms.empty()) {
    report::CounterTrack arms{"verification block: plan rung (1 the plan, 0 the baseline clocks)", pid, row, {}};
    for (const auto& [t, alpha] : verify_arms) arms.points.push_back({t, alpha});
    c.counters.push_back(std::move(arms));
  }
  c.other_data = {{"producer", "gearshift run --timeline"},
                  {"clock", "CLOCK_MONOTONIC ns (the runtime's)"},
                  {"intended_clocks", "the runtime's clock changes at the GPU time they serve"}};
  trace::Trace t;
  if (!trace_path.empty()) {
    std::error_code ec;
    if (!std::filesystem::exists(trace_path, ec)) {
      notes.push_back(fmt::format("kernels left out: no trace file {}", trace_path));
    } else {
      try {
        t = trace::import_trace(trace_path);
      } catch (const trace::TraceError& e) {
        notes.push_back(fmt::format("kernels left out: {}", e.what()));
      }
      const auto meta = nlohmann::json::parse(t.meta_json, nullptr, false);
      const std::int64_t trace_pid =
          meta.is_object() && meta.contains("pid") && meta["pid"].is_number_integer() ? meta["pid"].get<std::int64_t>() : -1;
      const trace::OpRecord* seen = nullptr;
      if (anchor && anchor->pid == trace_pid)
        for (const auto& op : t.ops)
          if (op.correlation == anchor->correlation && std::llabs(op.duration_ns - anchor->duration_ns) <= 1000) {
            seen = &op;
            break;
          }
      if (t.ops.empty()) {
      } else if (seen == nullptr) {
        notes.push_back(fmt::format("kernels of {} left out: none of them is a kernel the launch feed reported, so "
                                    "their clock (CUPTI's) cannot be put on the runtime's",
                                    trace_path));
      } else {
        c.trace = &t;
        c.trace_offset_ns = anchor->start_ns - seen->start_ns;
        c.other_data["kernels"] = fmt::format("{} (CUPTI clock, moved by {} ns onto the runtime's)", trace_path,
                                              c.trace_offset_ns);
      }
    }
  }
  report::write_trace_events(c, path);
  return notes;
}

}  // namespace gearshift::report
