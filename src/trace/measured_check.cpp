#include "trace/measured_check.hpp"

#include <cmath>
#include <optional>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "trace/error.hpp"

namespace gearshift::trace {

void check_measured(const Trace& t, const std::string& path) {
  const nlohmann::json meta = nlohmann::json::parse(t.meta_json, nullptr, false);
  if (meta.is_object())
    for (const char* key : {"s_per_iter", "s_per_step", "J_per_iter", "J_per_step", "avg_W"})
      if (meta.contains(key) && !meta[key].is_number() && !meta[key].is_null())
        throw TraceError(path, fmt::format("meta field '{}' is {} ({}), not a number: a measured figure must be a "
                                           "JSON number",
                                           key, meta[key].type_name(), meta[key].dump()));
  const MeasuredStep& m = t.measured;
  auto positive = [&](const std::optional<double>& v, const char* what, const char* unit) {
    if (v && !(std::isfinite(*v) && *v > 0))
      throw TraceError(path, fmt::format("meta {} is {} {}: a measured figure must be positive and finite", what, *v, unit));
  };
  positive(m.step_time_s, "s/step", "s");
  positive(m.energy_per_step_j, "J/step", "J");
  positive(m.average_power_w, "avg_W", "W");
  if (m.step_time_s && m.energy_per_step_j && m.average_power_w) {
    const double w = *m.energy_per_step_j / *m.step_time_s;
    if (std::abs(w - *m.average_power_w) > kMeasuredPowerTolerance * *m.average_power_w)
      throw TraceError(path, fmt::format("the meta contradicts itself: J/step over s/step is {:.4g} J / {:.4g} s = "
                                         "{:.0f} W, but avg_W is {:.0f} W (more than {:.0f} % apart); which one was "
                                         "measured per step?",
                                         *m.energy_per_step_j, *m.step_time_s, w, *m.average_power_w,
                                         100 * kMeasuredPowerTolerance));
  }
}

}  // namespace gearshift::trace
