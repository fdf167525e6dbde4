#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include <nlohmann/json.hpp>

#include "cupti/chrome_export.hpp"
#include "trace/chrome_import.hpp"
#include "trace/error.hpp"

using namespace gearshift;

namespace {

trace::Trace sample_trace() {
  trace::Trace t;
  t.source = "CUPTI";
  t.names = {"gemm(float*)", "Memcpy HtoD (Pinned -> Device)"};
  trace::OpRecord k;
  k.name_id = 0;
  k.start_ns = 1'700'000'000'123'456'789;  // absolute CUPTI-like timestamp: needs exact decimals
  k.duration_ns = 64'001;
  k.stream = 7;
  k.grid = {132, 1, 1};
  k.sm_clock_mhz = 1980;
  trace::OpRecord c = k;
  c.kind = trace::OpKind::memcpy;
  c.name_id = 1;
  c.start_ns += 100'000;
  c.bytes = 4096;
  t.ops = {k, c};
  t.markers = {trace::Marker{"gearshift.step", k.start_ns - 1000, 500'000, false}};
  t.samples = {trace::DeviceSample{0, k.start_ns, 1980, 3201, 612'345}};
  return t;
}

}  // namespace

TEST(ChromeExport, RoundTripsThroughTheChromeImporterExactly) {
  auto path = (std::filesystem::path(::testing::TempDir()) / "gearshift_export.json").string();
  cupti::write_chrome_trace(sample_trace(), path);
  trace::Trace back = trace::import_chrome_trace(path);
  ASSERT_EQ(back.ops.size(), 2u);
  EXPECT_EQ(back.name_of(back.ops[0]), "gemm(float*)");
  EXPECT_EQ(back.ops[0].start_ns, 1'700'000'000'123'456'789);
  EXPECT_EQ(back.ops[0].duration_ns, 64'001);
  EXPECT_EQ(back.ops[0].stream, 7);
  EXPECT_EQ(back.ops[1].kind, trace::OpKind::memcpy);
  ASSERT_EQ(back.markers.size(), 1u);
  EXPECT_EQ(back.markers[0].name, "gearshift.step");
  EXPECT_EQ(back.markers[0].duration_ns, 500'000);
}

TEST(ChromeExport, IsValidJsonWithCountersAndArgs) {
  auto path = (std::filesystem::path(::testing::TempDir()) / "gearshift_export2.json").string();
  cupti::write_chrome_trace(sample_trace(), path);
  std::ifstream f(path);
  auto j = nlohmann::json::parse(f);
  ASSERT_EQ(j["traceEvents"].size(), 4u);
  EXPECT_EQ(j["traceEvents"][0]["args"]["sm clock MHz"], 1980);
  EXPECT_EQ(j["traceEvents"][0]["args"]["grid"][0], 132);
  EXPECT_EQ(j["traceEvents"][1]["args"]["bytes"], 4096);
  EXPECT_EQ(j["traceEvents"][3]["ph"], "C");
  EXPECT_DOUBLE_EQ(j["traceEvents"][3]["args"]["power W"].get<double>(), 612.345);
}

TEST(ChromeExport, UnwritablePathThrows) {
  EXPECT_THROW(cupti::write_chrome_trace(sample_trace(), "/nonexistent-dir/x.json"), trace::TraceError);
}
