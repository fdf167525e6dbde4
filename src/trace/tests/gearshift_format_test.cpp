#include "trace/gearshift_format.hpp"

#include <gtest/gtest.h>
#include <zlib.h>

#include <cstdio>
#include <filesystem>
#include <fstream>

#include "trace/error.hpp"
#include "test_paths.hpp"

namespace gearshift::trace {
namespace {

std::string temp_path(const std::string& name) {
  return (std::filesystem::temp_directory_path() / ("gearshift_fmt_" + std::to_string(::getpid()) + "_" + name)).string();
}

Trace sample() {
  Trace t;
  t.source = "unit";
  t.names = {"gemm", "Memset (Device)"};
  t.meta_json = R"({"J_per_step":61.3,"s_per_step":0.0964})";
  OpRecord a;
  a.name_id = 0;
  a.start_ns = 1'000'000'123;
  a.duration_ns = 4567;
  a.stream = 7;
  a.correlation = 42;
  a.grid = {132, 1, 1};
  a.block = {384, 1, 1};
  a.registers_per_thread = 168;
  a.shared_memory_bytes = 200000;
  a.sm_clock_mhz = 1935;
  a.mem_clock_mhz = 3201;
  a.launch_ns = 999'000'000;
  OpRecord b;
  b.kind = OpKind::memset;
  b.name_id = 1;
  b.start_ns = 1'000'010'000;
  b.duration_ns = 768;
  b.bytes = 4;
  t.ops = {a, b};
  t.markers = {Marker{"gearshift.step", 999'000'000, 10'000'000, false}};
  return t;
}

TEST(GearshiftFormat, RoundTripsEveryField) {
  std::string path = temp_path("rt.gstrace.gz");
  Trace in = sample();
  write_gearshift_trace(in, path);
  Trace out = import_trace(path);  // sniffed as gearshift format
  std::remove(path.c_str());
  EXPECT_EQ(out.format, "gearshift-trace v1");
  EXPECT_TRUE(out.complete);
  ASSERT_EQ(out.ops.size(), 2u);
  const auto& a = out.ops[0];
  EXPECT_EQ(out.name_of(a), "gemm");
  EXPECT_EQ(a.start_ns, 1'000'000'123);
  EXPECT_EQ(a.duration_ns, 4567);
  EXPECT_EQ(a.correlation, 42);
  EXPECT_EQ(a.grid[0], 132);
  EXPECT_EQ(a.block[0], 384);
  EXPECT_EQ(a.registers_per_thread, 168);
  EXPECT_EQ(a.shared_memory_bytes, 200000);
  EXPECT_EQ(a.sm_clock_mhz, 1935);
  EXPECT_EQ(a.mem_clock_mhz, 3201);
  EXPECT_EQ(a.launch_ns, 999'000'000);
  EXPECT_EQ(out.ops[1].kind, OpKind::memset);
  EXPECT_EQ(out.name_of(out.ops[1]), "Memset (Device)");
  ASSERT_EQ(out.markers.size(), 1u);
  EXPECT_EQ(out.markers[0].name, "gearshift.step");
  ASSERT_TRUE(out.measured.energy_per_step_j);
  EXPECT_DOUBLE_EQ(*out.measured.energy_per_step_j, 61.3);
}

TEST(GearshiftFormat, ATraceWithoutTrailerIsIncomplete) {
  std::string path = temp_path("cut.gstrace.gz");
  {
    GearshiftTraceWriter w(path, "unit", "NVIDIA H200");
    OpRecord r;
    w.write(r, "k");
    w.close(false, 17, "activity buffers full");
    EXPECT_TRUE(w.ok());
    EXPECT_EQ(w.records_written(), 1u);
  }
  Trace t = read_gearshift_trace(path);
  EXPECT_FALSE(t.complete);
  EXPECT_EQ(t.gpu_name, "NVIDIA H200");
  // Cut the trailer away: still readable, still incomplete.
  std::string text;
  {
    gzFile f = gzopen(path.c_str(), "rb");
    char buf[4096];
    int n;
    while ((n = gzread(f, buf, sizeof buf)) > 0) text.append(buf, static_cast<std::size_t>(n));
    gzclose(f);
  }
  text = text.substr(0, text.rfind("[\"end\""));
  {
    gzFile f = gzopen(path.c_str(), "wb");
    gzwrite(f, text.data(), static_cast<unsigned>(text.size()));
    gzclose(f);
  }
  t = read_gearshift_trace(path);
  std::remove(path.c_str());
  EXPECT_FALSE(t.complete);
  EXPECT_EQ(t.ops.size(), 1u);
}

TEST(GearshiftFormat, BadLinesNameTheLine) {
  std::string path = temp_path("bad.gstrace");
  std::ofstream(path) << R"({"format":"gearshift-trace","version":1})" << "\n" << R"(["k",0,1,2])" << "\n";
  try {
    read_gearshift_trace(path);
    FAIL();
  } catch (const TraceError& e) {
    EXPECT_NE(std::string(e.what()).find("line 2"), std::string::npos) << e.what();
  }
  std::ofstream(path) << R"({"format":"gearshift-trace","version":9})" << "\n";
  try {
    read_gearshift_trace(path);
    FAIL();
  } catch (const TraceError& e) {
    EXPECT_NE(std::string(e.what()).find("version 9"), std::string::npos) << e.what();
  }
  std::remove(path.c_str());
}

TEST(GearshiftFormat, WriterReportsAnUnwritablePath) {
  GearshiftTraceWriter w("/nonexistent-dir/x.gz", "unit", "");
  EXPECT_FALSE(w.ok());
  EXPECT_NE(w.error().find("cannot open"), std::string::npos);
}

}  // namespace
}  // namespace gearshift::trace
