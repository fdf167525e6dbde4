#include "cli/switching_args.hpp"

namespace gearshift::cli {

void add_switching_options(CLI::App* cmd, service::Switching& s) {
  cmd->add_option("--switch-latency-ms", s.latency_ms, "Clock-change latency L, ms (default: the plan's)")
      ->check(CLI::NonNegativeNumber);
  cmd->add_option("--min-interval-ms", s.min_interval_ms, "Merge changes closer than this, ms (default: L)")
      ->check(CLI::NonNegativeNumber);
}

}  // namespace gearshift::cli
