#include "cli/switching_args.hpp"

namespace gearshift::cli {

void SwitchingArgs::add_to(CLI::App* cmd) {
  // Checked when given; not given stays none.
  cmd->add_option("--switch-latency-ms", latency_ms, "Clock-change latency L, ms (default: the plan's)")
      ->check(CLI::NonNegativeNumber);
  cmd->add_option("--min-interval-ms", min_interval_ms, "Merge changes closer than this, ms (default: L)")
      ->check(CLI::NonNegativeNumber);
}

}  // namespace gearshift::cli
