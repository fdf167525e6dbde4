#include "cli/switching_args.hpp"

namespace gearshift::cli {

void add_switching_options(CLI::App* cmd, service::Switching& s) {
  cmd->add_option_function<double>("--switch-latency-ms", [&s](double ms) { s.latency_ns = ms * 1e6; },
                                   "Clock-change latency L, ms (default: the plan's)")
      ->check(CLI::NonNegativeNumber);
  cmd->add_option_function<double>("--min-interval-ms", [&s](double ms) { s.min_interval_ns = ms * 1e6; },
                                   "Merge changes closer than this, ms (default: L)")
      ->check(CLI::NonNegativeNumber);
}

}  // namespace gearshift::cli
