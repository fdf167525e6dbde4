#include <gtest/gtest.h>

#include "gpu/cuda_visible.hpp"

namespace gearshift::gpu {
namespace {

std::vector<DeviceInfo> four() {
  std::vector<DeviceInfo> v;
  const char* pci[] = {"00000000:18:00.0", "00000000:2A:00.0", "00000000:3A:00.0", "00000000:5D:00.0"};
  const char* uuid[] = {"GPU-aaaa1111", "GPU-bbbb2222", "GPU-aaaa3333", "GPU-cccc4444"};
  for (unsigned i = 0; i < 4; ++i) v.push_back(DeviceInfo{i, "H200", uuid[i], pci[i], false});
  return v;
}

TEST(CudaVisible, UnsetMeansAll) {
  EXPECT_EQ(cuda_visible_nvml_indices(four(), std::nullopt), (std::vector<unsigned>{0, 1, 2, 3}));
}

TEST(CudaVisible, IndicesAndUuidsInGivenOrder) {
  EXPECT_EQ(cuda_visible_nvml_indices(four(), "2,0"), (std::vector<unsigned>{2, 0}));
  EXPECT_EQ(cuda_visible_nvml_indices(four(), "GPU-cccc,1"), (std::vector<unsigned>{3, 1}));
  EXPECT_EQ(cuda_visible_nvml_indices(four(), " 3 , 1 "), (std::vector<unsigned>{3, 1}));
}

TEST(CudaVisible, StopsAtFirstInvalidEntryLikeCuda) {
  EXPECT_EQ(cuda_visible_nvml_indices(four(), "1,7,2"), (std::vector<unsigned>{1}));
  EXPECT_EQ(cuda_visible_nvml_indices(four(), "GPU-aaaa,2"), (std::vector<unsigned>{}));  // ambiguous prefix
  EXPECT_EQ(cuda_visible_nvml_indices(four(), ""), (std::vector<unsigned>{}));
  EXPECT_EQ(cuda_visible_nvml_indices(four(), "-1"), (std::vector<unsigned>{}));
  EXPECT_EQ(cuda_visible_nvml_indices(four(), "0,0"), (std::vector<unsigned>{0}));
  EXPECT_THROW(cuda_visible_nvml_indices(four(), "MIG-1234"), std::invalid_argument);
}

TEST(CudaVisible, PciBusIdForms) {
  auto a = parse_pci_bus_id("00000000:2A:00.0");
  auto b = parse_pci_bus_id("0000:2a:00.0");
  auto c = parse_pci_bus_id("2a:00.0");
  ASSERT_TRUE(a && b && c);
  EXPECT_EQ(*a, *b);
  EXPECT_EQ(*a, *c);
  EXPECT_EQ(a->bus, 0x2Au);
  EXPECT_FALSE(parse_pci_bus_id("garbage"));
  auto m = map_by_pci_bus_id(four(), {"0000:5D:00.0", "0000:18:00.0", "0000:99:00.0"});
  ASSERT_EQ(m.size(), 3u);
  EXPECT_EQ(m[0], 3u);
  EXPECT_EQ(m[1], 0u);
  EXPECT_FALSE(m[2]);
}

}  // namespace
}  // namespace gearshift::gpu
