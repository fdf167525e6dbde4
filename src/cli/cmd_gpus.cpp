#include <fmt/core.h>

#include "cli/commands.hpp"
#include "gpu/spec.hpp"

namespace gearshift::cli {

namespace {
void print_spec(const gpu::GpuSpec& s) {
  fmt::print("{} ({})\n", s.full_name, s.name);
  fmt::print("  SM clocks      {}-{} MHz, {} values\n", s.min_sm_clock_mhz(), s.max_sm_clock_mhz(),
             s.sm_clocks_mhz.size());
  std::string mem;
  for (int m : s.mem_clocks_mhz) mem += (mem.empty() ? "" : ", ") + std::to_string(m);
  fmt::print("  memory clocks  {} MHz\n", mem);
  fmt::print("  default clocks SM {} MHz, memory {} MHz\n", s.default_sm_clock_mhz, s.default_mem_clock_mhz);
  fmt::print("  power limit    {:.0f}-{:.0f} W (default {:.0f} W)\n", s.power_limit_min_w, s.power_limit_max_w,
             s.power_limit_default_w);
  fmt::print("  idle power     {:.0f} W at {} MHz, {:.0f} W at {} MHz\n", s.idle_power_min_clock_w,
             s.min_sm_clock_mhz(), s.idle_power_max_clock_w, s.max_sm_clock_mhz());
  fmt::print("  V-f knee       {} MHz\n", s.voltage_knee_mhz);
  fmt::print("  switch latency {:.1f} ms (estimate)\n", s.switch_latency_ms);
  fmt::print("  sources:\n");
  for (const auto& [k, v] : s.sources) fmt::print("    {}: {}\n", k, v);
}
}  // namespace

void add_gpus_command(CLI::App& app) {
  auto* cmd = app.add_subcommand("gpus", "List GPU specs (--spec NAME) from the embedded database");
  auto spec = std::make_shared<std::string>();
  cmd->add_option("--spec", *spec, "GPU spec name: h200, h100, a100, a40, rtx3080ti");
  cmd->callback([spec] {
    if (spec->empty()) {
      for (const auto& n : gpu::spec_names()) print_spec(gpu::find_spec(n));
      return;
    }
    try {
      print_spec(gpu::find_spec(*spec));
    } catch (const std::invalid_argument& e) {
      throw Exit(kUsage, std::string(e.what()) + "; pick one of those with --spec");
    }
  });
}

}  // namespace gearshift::cli
