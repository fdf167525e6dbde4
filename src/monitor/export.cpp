#include "monitor/export.hpp"

#include <cerrno>
#include <cstring>
#include <stdexcept>

#include <fmt/core.h>

namespace gearshift::monitor {

SampleLog::SampleLog(const std::string& path, Format format, Ns t0) : format_(format), t0_(t0) {
  f_ = std::fopen(path.c_str(), "w");
  if (!f_) throw std::runtime_error("cannot write " + path + ": " + std::strerror(errno));
  if (format_ == Format::kCsv) {
    std::fputs("t_s,gpu,energy_j,energy_counter_mj,power_w,sm_clock_mhz,mem_clock_mhz,temperature_c,"
               "clock_event_reasons\n",
               f_);
  }
}

SampleLog::~SampleLog() {
  if (f_) std::fclose(f_);
}

namespace {
template <class T>
std::string opt(const std::optional<T>& v, const char* empty) {
  return v ? fmt::format("{}", *v) : empty;
}
}  // namespace

void SampleLog::write(const GpuSample& s) {
  double t = static_cast<double>(s.t - t0_) * 1e-9;
  if (format_ == Format::kCsv) {
    fmt::print(f_, "{:.4f},{},{:.3f},{},{},{},{},{},{}\n", t, s.gpu, s.energy_j, opt(s.energy_counter_mj, ""),
               opt(s.power_w, ""), opt(s.sm_clock_mhz, ""), opt(s.mem_clock_mhz, ""), opt(s.temperature_c, ""),
               opt(s.clock_event_reasons, ""));
  } else {
    fmt::print(f_,
               "{{\"t_s\":{:.4f},\"gpu\":{},\"energy_j\":{:.3f},\"energy_counter_mj\":{},\"power_w\":{},"
               "\"sm_clock_mhz\":{},\"mem_clock_mhz\":{},\"temperature_c\":{},\"clock_event_reasons\":{}}}\n",
               t, s.gpu, s.energy_j, opt(s.energy_counter_mj, "null"), opt(s.power_w, "null"),
               opt(s.sm_clock_mhz, "null"), opt(s.mem_clock_mhz, "null"), opt(s.temperature_c, "null"),
               opt(s.clock_event_reasons, "null"));
  }
  std::fflush(f_);  // a killed monitor still leaves a readable log
}

namespace {
std::string escape_label(const std::string& v) {
  std::string out;
  for (char c : v) {
    if (c == '\\' || c == '"') out += '\\';
    if (c == '\n') {
      out += "\\n";
      continue;
    }
    out += c;
  }
  return out;
}
}  // namespace

std::string prometheus_text(const std::vector<GpuSample>& samples, const std::vector<gpu::DeviceInfo>& devices) {
  struct Metric {
    const char* name;
    const char* help;
    std::optional<double> (*get)(const GpuSample&);
  };
  static const Metric kMetrics[] = {
      {"DCGM_FI_DEV_POWER_USAGE", "Power draw (in W).", [](const GpuSample& s) { return s.power_w; }},
      {"DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION", "Total energy consumption since boot (in mJ).",
       [](const GpuSample& s) -> std::optional<double> {
         if (!s.energy_counter_mj) return std::nullopt;
         return static_cast<double>(*s.energy_counter_mj);
       }},
      {"DCGM_FI_DEV_SM_CLOCK", "SM clock frequency (in MHz).",
       [](const GpuSample& s) -> std::optional<double> { return s.sm_clock_mhz; }},
      {"DCGM_FI_DEV_MEM_CLOCK", "Memory clock frequency (in MHz).",
       [](const GpuSample& s) -> std::optional<double> { return s.mem_clock_mhz; }},
      {"DCGM_FI_DEV_GPU_TEMP", "GPU temperature (in C).",
       [](const GpuSample& s) -> std::optional<double> { return s.temperature_c; }},
      {"DCGM_FI_DEV_CLOCKS_EVENT_REASONS", "Current clock event (throttle) reasons (NVML bitmask).",
       [](const GpuSample& s) -> std::optional<double> {
         if (!s.clock_event_reasons) return std::nullopt;
         return static_cast<double>(*s.clock_event_reasons);
       }},
  };
  std::string out;
  for (const Metric& m : kMetrics) {
    out += fmt::format("# HELP {} {}\n# TYPE {} gauge\n", m.name, m.help, m.name);
    for (const GpuSample& s : samples) {
      auto v = m.get(s);
      if (!v) continue;
      std::string uuid, pci, model;
      for (const auto& d : devices) {
        if (d.index == s.gpu) {
          uuid = d.uuid;
          pci = d.pci_bus_id;
          model = d.name;
        }
      }
      out += fmt::format("{}{{gpu=\"{}\",UUID=\"{}\",pci_bus_id=\"{}\",device=\"nvidia{}\",modelName=\"{}\"}} {}\n",
                         m.name, s.gpu, escape_label(uuid), escape_label(pci), s.gpu, escape_label(model), *v);
    }
  }
  return out;
}

}  // namespace gearshift::monitor
