#include "gpu/spec.hpp"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <initializer_list>
#include <stdexcept>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

namespace gearshift::embedded {
extern const unsigned char spec_h200[];
extern const std::size_t spec_h200_size;
extern const unsigned char spec_h100[];
extern const std::size_t spec_h100_size;
extern const unsigned char spec_a100[];
extern const std::size_t spec_a100_size;
extern const unsigned char spec_a40[];
extern const std::size_t spec_a40_size;
extern const unsigned char spec_rtx3080ti[];
extern const std::size_t spec_rtx3080ti_size;
extern const unsigned char spec_v100[];
extern const std::size_t spec_v100_size;
extern const unsigned char spec_b200[];
extern const std::size_t spec_b200_size;
}  // namespace gearshift::embedded

namespace gearshift::gpu {
namespace {

struct Embedded {
  const char* name;
  const unsigned char* data;
  const std::size_t* size;
  bool sxm;                             // the spec is of the SXM board (PCIe and NVL cards differ)
  std::initializer_list<int> sizes_gb;  // memory sizes the spec's board comes in (its full_name)
};

const Embedded kEmbedded[] = {
    {"a100", embedded::spec_a100, &embedded::spec_a100_size, true, {80}},
    {"a40", embedded::spec_a40, &embedded::spec_a40_size, false, {48}},
    {"b200", embedded::spec_b200, &embedded::spec_b200_size, true, {180, 192}},
    {"h100", embedded::spec_h100, &embedded::spec_h100_size, true, {80}},
    {"h200", embedded::spec_h200, &embedded::spec_h200_size, true, {141}},
    {"rtx3080ti", embedded::spec_rtx3080ti, &embedded::spec_rtx3080ti_size, false, {12}},
    {"v100", embedded::spec_v100, &embedded::spec_v100_size, true, {16, 32}},
};

// Why a device name that matched spec `e` is another board ("" when it is the spec's): a PCIe or NVL card of
// an SXM spec, or a memory size the spec's board does not come in ("40gb" for the 80 GB A100).
std::string other_board(const Embedded& e, const std::vector<std::string>& words) {
  for (const std::string& w : words) {
    if (e.sxm && w == "pcie") return fmt::format("a PCIe card, not the SXM board of the {} spec", e.name);
    if (e.sxm && w == "nvl") return fmt::format("an NVL card, not the SXM board of the {} spec", e.name);
    const bool digits = std::all_of(w.begin(), w.end() - std::min<std::size_t>(2, w.size()),
                                    [](char c) { return std::isdigit(static_cast<unsigned char>(c)) != 0; });
    if (w.size() > 2 && w.size() <= 8 && w.ends_with("gb") && digits) {  // (at most 6 digits: stoi never throws)
      const int gb = std::stoi(w.substr(0, w.size() - 2));
      if (std::find(e.sizes_gb.begin(), e.sizes_gb.end(), gb) == e.sizes_gb.end())
        return fmt::format("a {} GB board, not the {} GB of the {} spec", gb, *e.sizes_gb.begin(), e.name);
    }
  }
  return {};
}

std::string normalise(std::string_view name) {
  std::string out;
  for (char c : name) {
    if (std::isalnum(static_cast<unsigned char>(c))) out += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  }
  for (bool changed = true; changed;) {
    changed = false;
    for (const char* suffix : {"sxm5", "sxm4", "sxm", "80gb", "141gb", "pcie"}) {
      std::string s(suffix);
      if (out.size() > s.size() && out.ends_with(s)) out.resize(out.size() - s.size()), changed = true;
    }
  }
  return out;
}

}  // namespace

std::vector<std::string> spec_names() {
  std::vector<std::string> names;
  for (const auto& e : kEmbedded) names.emplace_back(e.name);
  return names;
}

GpuSpec parse_spec(std::string_view json_text, std::string_view origin) {
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(json_text);
  } catch (const nlohmann::json::exception& e) {
    throw std::invalid_argument(fmt::format("{}: not a GPU spec JSON file: {}", origin, e.what()));
  }
  auto field = [&](const char* key) -> const nlohmann::json& {
    if (!j.contains(key)) throw std::invalid_argument(fmt::format("{}: GPU spec lacks field '{}'", origin, key));
    return j.at(key);
  };
  try {
    GpuSpec s;
    s.name = field("name").get<std::string>();
    s.full_name = field("full_name").get<std::string>();
    const auto& sm = field("sm_clocks_mhz");
    // A fractional step gives the floor of min + k·step: V100's 7.5 gives its 135, 142, 150, 157, ... MHz.
    const int lo = sm.at("min").get<int>(), hi = sm.at("max").get<int>();
    const double step = sm.at("step").get<double>();
    if (lo <= 0 || hi < lo || !(step >= 1))
      throw std::invalid_argument(fmt::format("{}: sm_clocks_mhz must satisfy 0 < min <= max, step >= 1", origin));
    for (int k = 0;; ++k) {
      const int f = static_cast<int>(std::floor(lo + k * step + 1e-9));
      if (f > hi) break;
      s.sm_clocks_mhz.push_back(f);
    }
    s.mem_clocks_mhz = field("mem_clocks_mhz").get<std::vector<int>>();
    if (s.mem_clocks_mhz.empty()) throw std::invalid_argument(fmt::format("{}: mem_clocks_mhz is empty", origin));
    std::sort(s.mem_clocks_mhz.begin(), s.mem_clocks_mhz.end());
    s.default_sm_clock_mhz = field("default_sm_clock_mhz").get<int>();
    s.default_mem_clock_mhz = field("default_mem_clock_mhz").get<int>();
    const auto& pl = field("power_limit_w");
    s.power_limit_min_w = pl.at("min").get<double>();
    s.power_limit_max_w = pl.at("max").get<double>();
    s.power_limit_default_w = pl.at("default").get<double>();
    const auto& idle = field("idle_power_w");
    s.idle_power_min_clock_w = idle.at("at_min_sm_clock").get<double>();
    s.idle_power_max_clock_w = idle.at("at_max_sm_clock").get<double>();
    s.max_board_power_w = field("max_board_power_w").get<double>();
    s.voltage_knee_mhz = field("voltage_knee_mhz").get<int>();
    s.memory_power_w_at_max_clock = field("memory_power_w_at_max_clock").get<double>();
    s.switch_latency_ns = field("switch_latency_ms").get<double>() * 1e6;
    s.observed_capped_sm_clock_mhz = j.value("observed_capped_sm_clock_mhz", 0);
    s.energy_counter_update_ns = std::llround(field("energy_counter_update_ms").get<double>() * 1e6);
    s.gap_power_decay_ns = j.value("gap_power_decay_us", 0.0) * 1e3;
    if (!(s.gap_power_decay_ns >= 0))
      throw std::invalid_argument(fmt::format("{}: gap_power_decay_us must be >= 0", origin));
    s.power_limit_window_ns = j.value("power_limit_window_us", 0.0) * 1e3;
    if (!(s.power_limit_window_ns >= 0))
      throw std::invalid_argument(fmt::format("{}: power_limit_window_us must be >= 0", origin));
    for (const auto& [k, v] : field("sources").items()) s.sources.emplace_back(k, v.get<std::string>());
    return s;
  } catch (const nlohmann::json::exception& e) {
    throw std::invalid_argument(fmt::format("{}: bad GPU spec field: {}", origin, e.what()));
  }
}

GpuSpec find_spec(std::string_view name) {
  const std::string key = normalise(name);
  for (const auto& e : kEmbedded) {
    if (key == e.name) {
      std::string_view text(reinterpret_cast<const char*>(e.data), *e.size);
      return parse_spec(text, fmt::format("data/gpus/{}.json", e.name));
    }
  }
  // A device name as NVML or a trace gives it ("Tesla V100-SXM2-32GB", "NVIDIA H100 80GB HBM3").
  if (std::string by_device = spec_name_for_device(name); !by_device.empty()) return find_spec(by_device);
  std::string known;
  for (const auto& e : kEmbedded) known += (known.empty() ? "" : ", ") + std::string(e.name);
  throw std::invalid_argument(fmt::format("unknown GPU spec '{}' (known: {})", name, known));
}

std::string spec_name_for_device(std::string_view device_name, std::string* why) {
  std::vector<std::string> words(1);
  for (char c : device_name) {
    if (std::isalnum(static_cast<unsigned char>(c))) words.back() += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    else if (!words.back().empty()) words.emplace_back();
  }
  // Joined runs of words: "rtx 3080 ti" is "rtx3080ti". Whole words only, so "a100" never matches "a1000".
  for (std::size_t i = 0; i < words.size(); ++i) {
    std::string joined;
    for (std::size_t j = i; j < words.size() && !words[j].empty(); ++j) {
      joined += words[j];
      for (const auto& e : kEmbedded)
        if (joined == e.name) {
          // A spec's clocks and power limit hold for its board only: planned with the SXM5 spec, an H100 PCIe
          // got 1980 MHz SM clocks it does not have and a 700 W cap for a 350 W card.
          if (std::string other = other_board(e, words); !other.empty()) {
            if (why) *why = std::move(other);
            return {};
          }
          return e.name;
        }
    }
  }
  return {};
}

}  // namespace gearshift::gpu
