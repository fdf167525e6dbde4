#include "cli/switching_args.hpp"

#include <cmath>
#include <string>

#include <fmt/format.h>

namespace gearshift::cli {

CLI::Validator finite_range(double lo, double hi) {
  return CLI::Validator(
      [lo, hi](std::string& text) -> std::string {
        double v = 0;
        try {
          std::size_t used = 0;
          v = std::stod(text, &used);
          if (used != text.size()) return fmt::format("'{}' is not a number", text);
        } catch (const std::exception&) {
          return fmt::format("'{}' is not a number", text);
        }
        if (!std::isfinite(v) || v < lo || v > hi) return fmt::format("must be a finite number in [{}, {}], not {}", lo, hi, text);
        return {};
      },
      fmt::format("in [{}, {}]", lo, hi));
}

void add_switching_options(CLI::App* cmd, service::Switching& s) {
  cmd->add_option_function<double>("--switch-latency-ms", [&s](double ms) { s.latency_ns = ms * 1e6; },
                                   "Clock-change latency L, ms (default: the plan's)")
      ->check(finite_range(0, kMaxOptionMs));
  cmd->add_option_function<double>("--min-interval-ms", [&s](double ms) { s.min_interval_ns = ms * 1e6; },
                                   "Merge changes closer than this, ms (default: L)")
      ->check(finite_range(0, kMaxOptionMs));
}

}  // namespace gearshift::cli
