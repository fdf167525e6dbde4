// Which NVML devices a CUDA program sees, and in which order (its CUDA ordinals 0, 1, ...).
//
// CUDA_VISIBLE_DEVICES holds indices or UUIDs ("GPU-xxxx", prefixes allowed), comma separated; CUDA stops at
// the first entry it cannot resolve. Indices count GPUs in PCI bus order, which is NVML's order and CUDA's
// with CUDA_DEVICE_ORDER=PCI_BUS_ID (the order every launcher sets for multi-GPU jobs). When the program's own
// PCI bus ids per ordinal are known (torch.cuda.get_device_properties(i).pci_bus_id), map_by_pci_bus_id
// gives the exact mapping without that assumption.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "gpu/nvml.hpp"

namespace gearshift::gpu {

// NVML indices for CUDA ordinals 0..n-1 under the given CUDA_VISIBLE_DEVICES value (nullopt: variable unset,
// every device visible). Throws std::invalid_argument for an entry naming a MIG instance ("MIG-...").
std::vector<unsigned> cuda_visible_nvml_indices(const std::vector<DeviceInfo>& devices,
                                                std::optional<std::string_view> cuda_visible_devices);

// Parse "0000:18:00.0" / "00000000:18:00.0" / "18:00.0" into domain, bus, device, function; nullopt if bad.
struct PciAddress {
  unsigned domain = 0, bus = 0, device = 0, function = 0;
  bool operator==(const PciAddress&) const = default;
};
std::optional<PciAddress> parse_pci_bus_id(std::string_view text);

// NVML index of each CUDA ordinal given the ordinals' PCI bus ids; nullopt for an id no NVML device has.
std::vector<std::optional<unsigned>> map_by_pci_bus_id(const std::vector<DeviceInfo>& devices,
                                                       const std::vector<std::string>& cuda_pci_bus_ids);

}  // namespace gearshift::gpu
