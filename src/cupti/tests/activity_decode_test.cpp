#include <gtest/gtest.h>

#include "cupti/activity_decode.hpp"

using namespace gearshift;
using namespace gearshift::cupti;

TEST(ActivityDecode, Kernel) {
  CUpti_ActivityKernel10 k{};
  k.kind = CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL;
  k.name = "_Z4geluPf";
  k.start = 1000;
  k.end = 3500;
  k.deviceId = 1;
  k.streamId = 13;
  k.correlationId = 42;
  k.gridX = 528;
  k.gridY = 2;
  k.gridZ = 1;
  k.blockX = 256;
  k.blockY = k.blockZ = 1;
  k.registersPerThread = 40;
  k.staticSharedMemory = 1024;
  k.dynamicSharedMemory = 2048;
  k.graphId = 9;
  std::string label;
  Decoded d = decode_record(reinterpret_cast<const CUpti_Activity*>(&k), true, label);
  const auto* a = std::get_if<GpuActivity>(&d);
  ASSERT_NE(a, nullptr);
  EXPECT_EQ(a->kind, trace::OpKind::kernel);
  EXPECT_EQ(a->name, "_Z4geluPf");
  EXPECT_EQ(a->start_ns, 1000);
  EXPECT_EQ(a->end_ns, 3500);
  EXPECT_EQ(a->device, 1u);
  EXPECT_EQ(a->stream, 13u);
  EXPECT_EQ(a->correlation, 42u);
  EXPECT_EQ(a->grid[0], 528);
  EXPECT_EQ(a->grid[1], 2);
  EXPECT_EQ(a->block[0], 256);
  EXPECT_EQ(a->registers_per_thread, 40);
  EXPECT_EQ(a->shared_memory_bytes, 3072);
  EXPECT_EQ(a->graph_id, 9u);
  // CUDA 12 layout: graph id not read.
  d = decode_record(reinterpret_cast<const CUpti_Activity*>(&k), false, label);
  EXPECT_EQ(std::get<GpuActivity>(d).graph_id, 0u);
}

TEST(ActivityDecode, MemcpyAndMemset) {
  CUpti_ActivityMemcpy6 c{};
  c.kind = CUPTI_ACTIVITY_KIND_MEMCPY;
  c.copyKind = CUPTI_ACTIVITY_MEMCPY_KIND_HTOD;
  c.srcKind = CUPTI_ACTIVITY_MEMORY_KIND_PINNED;
  c.dstKind = CUPTI_ACTIVITY_MEMORY_KIND_DEVICE;
  c.bytes = 65536;
  c.start = 10;
  c.end = 20;
  c.correlationId = 5;
  std::string label;
  Decoded d = decode_record(reinterpret_cast<const CUpti_Activity*>(&c), true, label);
  const auto& a = std::get<GpuActivity>(d);
  EXPECT_EQ(a.kind, trace::OpKind::memcpy);
  EXPECT_EQ(a.name, "Memcpy HtoD (Pinned -> Device)");
  EXPECT_EQ(a.bytes, 65536);
  EXPECT_EQ(a.correlation, 5u);

  CUpti_ActivityMemset4 s{};
  s.kind = CUPTI_ACTIVITY_KIND_MEMSET;
  s.memoryKind = CUPTI_ACTIVITY_MEMORY_KIND_DEVICE;
  s.bytes = 128;
  d = decode_record(reinterpret_cast<const CUpti_Activity*>(&s), true, label);
  EXPECT_EQ(std::get<GpuActivity>(d).name, "Memset (Device)");
  EXPECT_EQ(std::get<GpuActivity>(d).kind, trace::OpKind::memset);
}

TEST(ActivityDecode, MarkersAndIgnoredKinds) {
  CUpti_ActivityMarker2 m{};
  m.kind = CUPTI_ACTIVITY_KIND_MARKER;
  m.flags = CUPTI_ACTIVITY_FLAG_MARKER_START;
  m.id = 3;
  m.timestamp = 777;
  m.name = "gearshift.step";
  std::string label;
  Decoded d = decode_record(reinterpret_cast<const CUpti_Activity*>(&m), true, label);
  const auto& s = std::get<MarkerActivity>(d);
  EXPECT_EQ(s.phase, MarkerActivity::Phase::start);
  EXPECT_EQ(s.id, 3u);
  EXPECT_EQ(s.timestamp_ns, 777);
  EXPECT_EQ(s.name, "gearshift.step");
  m.flags = CUPTI_ACTIVITY_FLAG_MARKER_END;
  m.name = nullptr;
  EXPECT_EQ(std::get<MarkerActivity>(decode_record(reinterpret_cast<const CUpti_Activity*>(&m), true, label)).phase,
            MarkerActivity::Phase::end);
  CUpti_Activity other{CUPTI_ACTIVITY_KIND_DRIVER};
  EXPECT_TRUE(std::holds_alternative<std::monostate>(decode_record(&other, true, label)));
  EXPECT_TRUE(std::holds_alternative<std::monostate>(decode_record(nullptr, true, label)));
}
