#include <fmt/core.h>
#include <fmt/format.h>
#include <fmt/ranges.h>

#include "cli/commands.hpp"
#include "gpu/open_gpus.hpp"
#include "runtime/safety.hpp"
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
  fmt::print("  switch latency {:.1f} ms (estimate)\n", s.switch_latency_ns / 1e6);
  fmt::print("  sources:\n");
  for (const auto& [k, v] : s.sources) fmt::print("    {}: {}\n", k, v);
}
template <class T>
std::string show(const gpu::Result<T>& r, const char* unit, const char* format = "{}") {
  if (!r) return "n/a (" + r.error().message + ")";
  return fmt::format(fmt::runtime(format), r.value()) + unit;
}

std::string clock_ranges(const gpu::Device& d) {
  auto mem = d.supported_memory_clocks_mhz();
  if (!mem) return "n/a (" + mem.error().message + ")";
  std::string out;
  for (unsigned m : mem.value()) {
    auto sm = d.supported_sm_clocks_mhz(m);
    out += fmt::format("{}memory {} MHz: SM ", out.empty() ? "" : "; ", m);
    if (!sm || sm.value().empty()) {
      out += "n/a";
      continue;
    }
    const auto& v = sm.value();  // descending
    out += fmt::format("{}-{} MHz ({} values)", v.back(), v.front(), v.size());
  }
  return out;
}

// Lists the GPUs NVML sees. Reads only.
void list_real_gpus() {
  gpu::OpenedGpus g = gpu::open_gpus(false);
  bool privileged = runtime::process_is_privileged();
  for (std::size_t i = 0; i < g.devices.size(); ++i) {
    const gpu::Device& d = g.devices[i];
    const gpu::DeviceInfo& info = g.infos[i];
    fmt::print("GPU {}: {}\n", info.index, info.name);
    fmt::print("  UUID            {}\n", info.uuid);
    fmt::print("  PCI bus id      {}\n", info.pci_bus_id);
    fmt::print("  MIG             {}\n", info.mig_enabled ? "enabled" : "disabled");
    fmt::print("  clocks          {}\n", clock_ranges(d));
    fmt::print("  current clocks  SM {}, memory {}\n", show(d.sm_clock_mhz(), " MHz"), show(d.mem_clock_mhz(), " MHz"));
    fmt::print("  power           {} instant, {} average, limit {}\n", show(d.instant_power_w(), " W", "{:.1f}"),
               show(d.average_power_w(), " W", "{:.1f}"), show(d.power_limit_w(), " W", "{:.0f}"));
    auto e = d.total_energy_mj();
    fmt::print("  energy counter  {}\n", e ? fmt::format("{:.3f} J", static_cast<double>(e.value()) * 1e-3)
                                             : "n/a (" + e.error().message + ")");
    fmt::print("  temperature     {}\n", show(d.temperature_c(), " C"));
    auto reasons = d.clock_event_reasons();
    fmt::print("  clock events    {}\n", reasons ? reasons.value().describe() : "n/a (" + reasons.error().message + ")");
    auto restricted = d.clocks_api_restricted();
    std::string why;
    bool may = runtime::may_set_clocks(privileged, restricted.value_or(false), &why);
    fmt::print("  may set clocks  {}\n", may ? std::string("yes (root or CAP_SYS_ADMIN)") : "no: " + why);
  }
}

}  // namespace

void add_gpus_command(CLI::App& app) {
  auto* cmd = app.add_subcommand("gpus", "List this machine's GPUs through NVML (read-only), or print an embedded "
                                         "GPU spec with --spec NAME");
  auto spec = std::make_shared<std::string>();
  cmd->add_option("--spec", *spec, "GPU spec name: " + fmt::format("{}", fmt::join(gpu::spec_names(), ", ")) + ", or all");
  cmd->callback([spec] {
    if (spec->empty()) {
      list_real_gpus();
      return;
    }
    if (*spec == "all") {
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
