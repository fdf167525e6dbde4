#include "gpu/cuda_visible.hpp"

#include <algorithm>
#include <cctype>
#include <charconv>
#include <stdexcept>
#include <tuple>

namespace gearshift::gpu {

namespace {

std::string_view trim(std::string_view s) {
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.front()))) s.remove_prefix(1);
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back()))) s.remove_suffix(1);
  return s;
}

std::string lower(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

std::optional<unsigned> parse_hex(std::string_view s) {
  unsigned v = 0;
  if (s.empty()) return std::nullopt;
  auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), v, 16);
  if (ec != std::errc() || p != s.data() + s.size()) return std::nullopt;
  return v;
}

}  // namespace

std::optional<PciAddress> parse_pci_bus_id(std::string_view text) {
  text = trim(text);
  // [domain:]bus:device.function
  auto dot = text.rfind('.');
  if (dot == std::string_view::npos) return std::nullopt;
  auto fn = parse_hex(text.substr(dot + 1));
  auto head = text.substr(0, dot);
  auto c2 = head.rfind(':');
  if (c2 == std::string_view::npos) return std::nullopt;
  auto devnum = parse_hex(head.substr(c2 + 1));
  head = head.substr(0, c2);
  auto c1 = head.rfind(':');
  std::optional<unsigned> domain = 0u, bus;
  if (c1 == std::string_view::npos) {
    bus = parse_hex(head);
  } else {
    domain = parse_hex(head.substr(0, c1));
    bus = parse_hex(head.substr(c1 + 1));
  }
  if (!fn || !devnum || !bus || !domain) return std::nullopt;
  return PciAddress{*domain, *bus, *devnum, *fn};
}

std::vector<unsigned> cuda_visible_nvml_indices(const std::vector<DeviceInfo>& devices,
                                                std::optional<std::string_view> cuda_visible_devices) {
  std::vector<unsigned> out;
  if (!cuda_visible_devices) {
    for (const auto& d : devices) out.push_back(d.index);
    return out;
  }
  std::string_view rest = *cuda_visible_devices;
  while (!rest.empty() || out.empty()) {
    auto comma = rest.find(',');
    std::string_view tok = trim(rest.substr(0, comma));
    rest = comma == std::string_view::npos ? std::string_view{} : rest.substr(comma + 1);
    if (tok.empty()) break;
    std::optional<unsigned> found;
    if (lower(tok.substr(0, 4)) == "mig-") {
      throw std::invalid_argument("CUDA_VISIBLE_DEVICES names a MIG instance (" + std::string(tok) +
                                  "): per-instance energy is not measurable; name the whole GPU");
    }
    if (lower(tok.substr(0, 4)) == "gpu-") {
      std::string want = lower(tok);
      int matches = 0;
      for (const auto& d : devices) {
        if (lower(d.uuid).rfind(want, 0) == 0) {
          found = d.index;
          ++matches;
        }
      }
      if (matches != 1) found.reset();  // CUDA also rejects an ambiguous prefix
    } else {
      unsigned v = 0;
      auto [p, ec] = std::from_chars(tok.data(), tok.data() + tok.size(), v);
      if (ec == std::errc() && p == tok.data() + tok.size() && v < devices.size()) {
        // devices are in NVML (PCI bus) order; sort defensively by PCI address.
        std::vector<const DeviceInfo*> by_pci;
        for (const auto& d : devices) by_pci.push_back(&d);
        std::stable_sort(by_pci.begin(), by_pci.end(), [](const DeviceInfo* a, const DeviceInfo* b) {
          auto pa = parse_pci_bus_id(a->pci_bus_id), pb = parse_pci_bus_id(b->pci_bus_id);
          if (!pa || !pb) return false;
          return std::tie(pa->domain, pa->bus, pa->device, pa->function) <
                 std::tie(pb->domain, pb->bus, pb->device, pb->function);
        });
        found = by_pci[v]->index;
      }
    }
    // CUDA ignores everything from the first invalid entry on, and a device listed twice is an error there.
    if (!found || std::find(out.begin(), out.end(), *found) != out.end()) break;
    out.push_back(*found);
  }
  return out;
}

std::vector<std::optional<unsigned>> map_by_pci_bus_id(const std::vector<DeviceInfo>& devices,
                                                       const std::vector<std::string>& cuda_pci_bus_ids) {
  std::vector<std::optional<unsigned>> out;
  for (const auto& id : cuda_pci_bus_ids) {
    std::optional<unsigned> hit;
    auto want = parse_pci_bus_id(id);
    for (const auto& d : devices) {
      if (want && parse_pci_bus_id(d.pci_bus_id) == want) hit = d.index;
    }
    out.push_back(hit);
  }
  return out;
}

}  // namespace gearshift::gpu
