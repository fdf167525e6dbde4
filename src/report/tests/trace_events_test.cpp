#include "report/trace_events.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <limits>

#include "trace/chrome_import.hpp"
#include "trace/error.hpp"
#include "trace/gearshift_format.hpp"

namespace gearshift::report {
namespace {

using json = nlohmann::json;

std::string temp(const std::string& name) { return (std::filesystem::path(::testing::TempDir()) / name).string(); }

trace::Trace small_trace() {
  trace::Trace t;
  t.source = "test";
  t.names = {"ampere_sgemm_128x64_nn", "vectorized_elementwise_kernel<4>", "Memcpy HtoD (Pinned -> Device)"};
  std::int64_t at = 1'700'000'000'123'456'789;  // absolute CUPTI-like timestamp: exact decimals needed
  for (int i = 0; i < 6; ++i) {
    trace::OpRecord k;
    k.name_id = static_cast<std::uint32_t>(i % 2);
    k.start_ns = at;
    k.duration_ns = 64'001 + i;
    k.stream = i % 2 == 0 ? 7 : 13;
    k.correlation = 100 + i;
    t.ops.push_back(k);
    at += 100'003;
  }
  trace::OpRecord c;
  c.kind = trace::OpKind::memcpy;
  c.name_id = 2;
  c.start_ns = at;
  c.duration_ns = 999;
  c.bytes = 4096;
  t.ops.push_back(c);
  t.markers = {trace::Marker{"gearshift.step", t.ops[0].start_ns - 1000, 500'000, false}};
  t.samples = {{0, t.ops[0].start_ns, 1980, 3201, 612'345},
               {0, t.ops[3].start_ns, 0, 3201, -1},  // SM clock and power not read
               {1, t.ops[4].start_ns, 1755, 0, 700'000}};
  return t;
}

json read(const std::string& path) {
  std::ifstream f(path);
  return json::parse(f);
}

// What Perfetto's JSON importer needs of each event (and chrome://tracing shows): ph and name always; pid and a
// numeric ts on every timed event; X: dur >= 0 and tid; C: args of numbers only; M: args.name.
void expect_perfetto_schema(const json& doc) {
  ASSERT_TRUE(doc.is_object());
  ASSERT_TRUE(doc["traceEvents"].is_array());
  for (const auto& e : doc["traceEvents"]) {
    SCOPED_TRACE(e.dump());
    ASSERT_TRUE(e.contains("ph") && e["ph"].is_string());
    ASSERT_TRUE(e.contains("name") && e["name"].is_string());
    ASSERT_TRUE(e.contains("pid"));
    const std::string ph = e["ph"];
    if (ph == "M") {
      EXPECT_TRUE(e["args"]["name"].is_string());
      continue;
    }
    ASSERT_TRUE(e.contains("ts") && e["ts"].is_number());
    if (ph == "X") {
      ASSERT_TRUE(e.contains("dur") && e["dur"].is_number());
      EXPECT_GE(e["dur"].get<double>(), 0);
      EXPECT_TRUE(e.contains("tid"));
      EXPECT_TRUE(e["cat"].is_string());
    } else if (ph == "C") {
      ASSERT_TRUE(e["args"].is_object());
      ASSERT_FALSE(e["args"].empty());
      for (const auto& [k, v] : e["args"].items()) EXPECT_TRUE(v.is_number()) << k;
    } else {
      ADD_FAILURE() << "unexpected phase " << ph;
    }
  }
}

TEST(TraceEvents, SampleTracksLeaveUnreadFieldsOut) {
  const auto tracks = sample_tracks(small_trace());
  ASSERT_EQ(tracks.size(), 5u);  // device 1 has no memory clock
  EXPECT_EQ(tracks[0].name, "SM clock (MHz)");
  EXPECT_EQ(tracks[0].process, "GPU 0");
  ASSERT_EQ(tracks[0].points.size(), 1u);  // the second sample read no SM clock
  EXPECT_EQ(tracks[0].points[0].value, 1980);
  EXPECT_EQ(tracks[1].name, "memory clock (MHz)");
  EXPECT_EQ(tracks[1].points.size(), 2u);
  EXPECT_EQ(tracks[2].name, "power (W)");
  ASSERT_EQ(tracks[2].points.size(), 1u);
  EXPECT_DOUBLE_EQ(tracks[2].points[0].value, 612.345);
  EXPECT_EQ(tracks[3].pid, 1);
  EXPECT_EQ(tracks[4].name, "power (W)");
}

TEST(TraceEvents, FileMeetsThePerfettoSchemaWithOneNumberPerCounterEvent) {
  const trace::Trace t = small_trace();
  TimelineContent c;
  c.trace = &t;
  c.counters = sample_tracks(t);
  c.counters.push_back({"planned SM clock (MHz)", 100, "GPU 0 planned clocks", {{t.ops[0].start_ns, 1500}}});
  const auto path = temp("timeline.json");
  write_trace_events(c, path);
  const json doc = read(path);
  expect_perfetto_schema(doc);
  std::size_t counters = 0, names = 0, kernels = 0;
  for (const auto& e : doc["traceEvents"]) {
    if (e["ph"] == "C") {
      ++counters;
      EXPECT_EQ(e["args"].size(), 1u);
    }
    names += e["ph"] == "M";
    kernels += e["ph"] == "X" && e["cat"] == "kernel";
  }
  EXPECT_EQ(counters, 1u + 2 + 1 + 1 + 1 + 1);
  EXPECT_EQ(names, 3u);  // GPU 0, GPU 1, GPU 0 planned clocks
  EXPECT_EQ(kernels, 6u);
  // The first counter event is GPU 0's SM clock at the first kernel's start, exact to the ns.
  for (const auto& e : doc["traceEvents"])
    if (e["ph"] == "C") {
      EXPECT_EQ(e["name"], "SM clock (MHz)");
      EXPECT_EQ(e["args"]["value"], 1980);
      EXPECT_EQ(e["pid"], 0);
      break;
    }
}

TEST(TraceEvents, KernelsRoundTripThroughGearshiftsChromeImporter) {
  const trace::Trace t = small_trace();
  TimelineContent c;
  c.trace = &t;
  c.counters = sample_tracks(t);
  const auto path = temp("roundtrip.json.gz");
  write_trace_events(c, path);
  const trace::Trace back = trace::import_chrome_trace(path);
  ASSERT_EQ(back.ops.size(), t.ops.size());
  for (std::size_t i = 0; i < t.ops.size(); ++i) {
    SCOPED_TRACE(i);
    EXPECT_EQ(back.name_of(back.ops[i]), t.name_of(t.ops[i]));
    EXPECT_EQ(back.ops[i].kind, t.ops[i].kind);
    EXPECT_EQ(back.ops[i].start_ns, t.ops[i].start_ns);
    EXPECT_EQ(back.ops[i].duration_ns, t.ops[i].duration_ns);
    EXPECT_EQ(back.ops[i].stream, t.ops[i].stream);
    EXPECT_EQ(back.ops[i].correlation, t.ops[i].correlation);
  }
  ASSERT_EQ(back.markers.size(), 1u);
  EXPECT_EQ(back.markers[0].duration_ns, 500'000);
}

TEST(TraceEvents, TheShippedTraceRoundTripsItsKernels) {
  const trace::Trace t = trace::import_trace(std::string(GEARSHIFT_DATA_DIR) + "/traces/gpt3xl_h200_trace.json.gz");
  TimelineContent c;
  c.trace = &t;
  const auto path = temp("gpt3xl_timeline.json.gz");
  write_trace_events(c, path);
  const trace::Trace back = trace::import_chrome_trace(path);
  ASSERT_EQ(back.ops.size(), t.ops.size());
  EXPECT_EQ(back.kernel_count(), t.kernel_count());
  for (std::size_t i = 0; i < t.ops.size(); i += 97) {
    EXPECT_EQ(back.name_of(back.ops[i]), t.name_of(t.ops[i]));
    EXPECT_EQ(back.ops[i].start_ns, t.ops[i].start_ns);
    EXPECT_EQ(back.ops[i].duration_ns, t.ops[i].duration_ns);
  }
}

TEST(TraceEvents, OffsetMovesTheTraceOntoTheCountersClock) {
  const trace::Trace t = small_trace();
  TimelineContent c;
  c.trace = &t;
  c.trace_offset_ns = -1'000'000'000'000'000'000;
  const auto path = temp("offset.json");
  write_trace_events(c, path);
  const trace::Trace back = trace::import_chrome_trace(path);
  EXPECT_EQ(back.ops[0].start_ns, t.ops[0].start_ns - 1'000'000'000'000'000'000);
}

TEST(TraceEvents, CountersOnlyAndBadValues) {
  TimelineContent c;
  c.counters.push_back({"power (W)", 0, "GPU 0", {{1000, 400.5}, {2000, 410}}});
  const auto path = temp("counters.json");
  write_trace_events(c, path);
  const json doc = read(path);
  expect_perfetto_schema(doc);
  EXPECT_EQ(doc["traceEvents"].size(), 3u);
  EXPECT_DOUBLE_EQ(doc["traceEvents"][1]["ts"].get<double>(), 1.0);  // µs
  c.counters[0].points.push_back({3000, std::numeric_limits<double>::quiet_NaN()});
  EXPECT_THROW(write_trace_events(c, temp("nan.json")), std::invalid_argument);
  c.counters[0].points.pop_back();
  EXPECT_THROW(write_trace_events(c, "/nonexistent-dir/x.json"), trace::TraceError);
}

}  // namespace
}  // namespace gearshift::report
