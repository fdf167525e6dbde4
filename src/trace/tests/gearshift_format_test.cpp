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

std::string gunzip(const std::string& path) {
  std::string text;
  gzFile f = gzopen(path.c_str(), "rb");
  char buf[4096];
  int n;
  while ((n = gzread(f, buf, sizeof buf)) > 0) text.append(buf, static_cast<std::size_t>(n));
  gzclose(f);
  return text;
}

void gzip_to(const std::string& path, const std::string& text) {
  gzFile f = gzopen(path.c_str(), "wb");
  gzwrite(f, text.data(), static_cast<unsigned>(text.size()));
  gzclose(f);
}

// A trace of `ops` kernel records closed with the given trailer.
std::string written(const std::string& name, int ops, bool complete, std::uint64_t dropped, const std::string& note = "") {
  std::string path = temp_path(name);
  GearshiftTraceWriter w(path, "unit", "NVIDIA H200");
  for (int i = 0; i < ops; ++i) {
    OpRecord r;
    r.start_ns = i * 1000;
    r.duration_ns = 500;
    w.write(r, i % 2 == 0 ? "even" : "odd");
  }
  w.close(complete, dropped, note);
  EXPECT_TRUE(w.ok());
  return path;
}

std::string error_of(const std::string& path) {
  try {
    read_gearshift_trace(path);
  } catch (const TraceError& e) {
    return e.what();
  }
  return "";
}

TEST(GearshiftFormat, TwoIdsOfOneNameAreOneName) {
  // A converter may write one name under two ids. Held the wrong value: two name ids, so a step whose every
  // other op used the second id matched only every two steps, and two training steps were planned as one.
  Trace in = sample();
  in.names = {"gemm", "gemm"};
  std::string path = temp_path("dupnames.gstrace.gz");
  write_gearshift_trace(in, path);
  Trace t = read_gearshift_trace(path);
  std::remove(path.c_str());
  ASSERT_EQ(t.names.size(), 1u);
  ASSERT_EQ(t.ops.size(), 2u);
  EXPECT_EQ(t.ops[0].name_id, 0u);
  EXPECT_EQ(t.ops[1].name_id, 0u);
  EXPECT_TRUE(t.complete);
}

TEST(GearshiftFormat, ATraceWithoutTrailerIsIncompleteWithAWarning) {
  std::string path = written("cut.gstrace.gz", 3, true, 0);
  Trace t = read_gearshift_trace(path);
  EXPECT_TRUE(t.complete);
  EXPECT_TRUE(t.health.has_trailer);
  EXPECT_TRUE(t.health.warnings.empty());
  EXPECT_EQ(t.gpu_name, "NVIDIA H200");
  // Cut the trailer away (the producer was killed): still readable, incomplete, and said so.
  std::string text = gunzip(path);
  gzip_to(path, text.substr(0, text.rfind("[\"end\"")));
  t = read_gearshift_trace(path);
  std::remove(path.c_str());
  EXPECT_FALSE(t.complete);
  EXPECT_FALSE(t.health.has_trailer);
  EXPECT_EQ(t.ops.size(), 3u);
  ASSERT_EQ(t.health.warnings.size(), 1u);
  EXPECT_EQ(t.health.warnings[0],
            "incomplete trace: no trailer (the producer was killed or the file was cut); only whole steps are used");
}

TEST(GearshiftFormat, ATrailerSayingIncompleteGivesAWarningWithItsNote) {
  std::string path = written("incomplete.gstrace.gz", 2, false, 0, "record cap reached (2 records)");
  Trace t = read_gearshift_trace(path);
  std::remove(path.c_str());
  EXPECT_FALSE(t.complete);
  EXPECT_TRUE(t.health.has_trailer);
  EXPECT_EQ(t.health.dropped_records, 0u);
  ASSERT_EQ(t.health.warnings.size(), 1u);
  EXPECT_EQ(t.health.warnings[0], "incomplete trace: the producer marked it incomplete (record cap reached (2 "
                                  "records)); only whole steps are used");
}

TEST(GearshiftFormat, DroppedRecordsUpToOnePercentAreCountedAndWarnedAbout) {
  EXPECT_DOUBLE_EQ(kMaxDroppedRecordShare, 0.01);
  std::string path = written("dropped.gstrace.gz", 995, false, 5, "5 activity records dropped by CUPTI");
  Trace t = read_gearshift_trace(path);
  std::remove(path.c_str());
  EXPECT_FALSE(t.complete);
  EXPECT_EQ(t.health.dropped_records, 5u);
  EXPECT_EQ(t.ops.size(), 995u);
  ASSERT_EQ(t.health.warnings.size(), 1u);
  EXPECT_EQ(t.health.warnings[0], "incomplete trace: the producer dropped 5 of 1000 records (0.50 %) (5 activity "
                                  "records dropped by CUPTI); steps that lost ops look shorter");
  // `complete: true` with dropped records (NVTX ranges at the tracer's cap) is incomplete all the same.
  path = written("dropped_ranges.gstrace.gz", 990, true, 10);  // exactly 1 %: still read
  t = read_gearshift_trace(path);
  std::remove(path.c_str());
  EXPECT_FALSE(t.complete);
  EXPECT_EQ(t.health.dropped_records, 10u);
  ASSERT_EQ(t.health.warnings.size(), 1u);
  EXPECT_NE(t.health.warnings[0].find("dropped 10 of 1000 records (1.00 %)"), std::string::npos);
}

TEST(GearshiftFormat, MoreThanOnePercentDroppedIsRefused) {
  std::string path = written("dropped_many.gstrace.gz", 989, false, 11);
  std::string e = error_of(path);
  std::remove(path.c_str());
  EXPECT_EQ(e, path + ": line 993: the producer dropped 11 of 1000 records (1.10 %), more than the 1 % a plan may miss");
  path = written("dropped_most.gstrace.gz", 1, false, 17, "activity buffers full");
  e = error_of(path);
  std::remove(path.c_str());
  EXPECT_NE(e.find("dropped 17 of 18 records (94.44 %) (activity buffers full), more than the 1 %"), std::string::npos) << e;
}

TEST(GearshiftFormat, ATrailerThatMiscountsTheRecordsIsRefused) {
  std::string path = written("miscount.gstrace.gz", 4, true, 0);
  std::string text = gunzip(path);
  std::size_t k = text.find("\n[\"k\"", text.find("\n[\"k\"") + 1);  // drop the second op line
  gzip_to(path, text.substr(0, k) + text.substr(text.find('\n', k + 1)));
  std::string e = error_of(path);
  EXPECT_NE(e.find("the trailer counts 4 records but the file holds 3 (records were lost or added)"), std::string::npos)
      << e;
  gzip_to(path, text + text.substr(text.find('\n') + 1));  // a second trace appended after the trailer
  e = error_of(path);
  std::remove(path.c_str());
  EXPECT_NE(e.find("data after the trailer (line 8)"), std::string::npos) << e;
}

TEST(GearshiftFormat, InvalidUtf8InANameIsWrittenAndReadAsReplacementCharacters) {
  std::string path = temp_path("utf8.gstrace.gz");
  {
    GearshiftTraceWriter w(path, "unit", "");
    OpRecord r;
    EXPECT_NO_THROW(w.write(r, "nvjet\xE9\xFF"));  // nlohmann's dump() threw json::type_error 316 here
    w.write(Marker{"step\xC3", 0, 10, false});
    w.close(true);
    EXPECT_TRUE(w.ok());
  }
  Trace t = read_gearshift_trace(path);
  ASSERT_EQ(t.ops.size(), 1u);
  ASSERT_EQ(t.markers.size(), 1u);
  EXPECT_EQ(t.name_of(t.ops[0]), "nvjet\xEF\xBF\xBD\xEF\xBF\xBD");
  EXPECT_EQ(t.markers[0].name, "step\xEF\xBF\xBD");
  // A file written by another producer with raw bad bytes is read the same way, with a warning.
  std::string text = gunzip(path);
  std::size_t at = text.find("nvjet") + 5;
  text.replace(at, 6, "\xE9\xFF");  // the writer put U+FFFD U+FFFD (6 bytes) there
  gzip_to(path, text);
  t = read_gearshift_trace(path);
  std::remove(path.c_str());
  ASSERT_EQ(t.ops.size(), 1u);
  EXPECT_EQ(t.name_of(t.ops[0]), "nvjet\xEF\xBF\xBD\xEF\xBF\xBD");
  ASSERT_EQ(t.health.warnings.size(), 1u);
  EXPECT_EQ(t.health.warnings[0],
            "2 invalid UTF-8 bytes in names replaced by U+FFFD (first at byte " + std::to_string(at + 1) + ")");
}

TEST(GearshiftFormat, BadInputs) {
  if (!test::have_shared()) GTEST_SKIP() << "../shared/data absent in this checkout";
  auto file = [](const char* name) { return test::shared_path(std::string("data/bad_inputs/") + name); };
  Trace g01 = read_gearshift_trace(file("g01_gpt2_gearshift_format.jsonl.gz"));  // the control
  EXPECT_TRUE(g01.complete);
  EXPECT_TRUE(g01.health.warnings.empty());
  EXPECT_EQ(g01.kernel_count(), 3u * 805u);

  Trace g04 = read_gearshift_trace(file("g04_gearshift_format_no_trailer.jsonl.gz"));
  EXPECT_FALSE(g04.complete);
  EXPECT_FALSE(g04.health.has_trailer);
  EXPECT_EQ(g04.ops.size(), g01.ops.size());
  ASSERT_EQ(g04.health.warnings.size(), 1u);
  EXPECT_NE(g04.health.warnings[0].find("incomplete trace: no trailer"), std::string::npos);

  Trace g06 = read_gearshift_trace(file("g06_gearshift_format_killed_at_80pct_no_trailer.jsonl.gz"));
  EXPECT_FALSE(g06.complete);
  EXPECT_FALSE(g06.health.has_trailer);
  EXPECT_EQ(g06.ops.size(), 1927u + 421u);
  ASSERT_EQ(g06.health.warnings.size(), 1u);
  EXPECT_NE(g06.health.warnings[0].find("only whole steps are used"), std::string::npos);

  const std::pair<const char*, const char*> refused[] = {
      {"g02_gearshift_format_version2.jsonl.gz", "line 1: unsupported gearshift trace version 2"},
      {"g03_gearshift_format_unknown_tag.jsonl.gz", "line 1507: unknown record tag 'z'"},
      {"g05_gearshift_format_cut_mid_line.jsonl.gz", "line 1961: truncated line"},
  };
  for (auto [name, words] : refused) {
    std::string e = error_of(file(name));
    EXPECT_NE(e.find(words), std::string::npos) << name << ": " << e;
  }
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
  // Records of the wrong length (a name line that swallowed the next record).
  std::ofstream(path) << R"({"format":"gearshift-trace","version":1})" << "\n"
                      << R"(["n",0,"k",0,0,0,0,0,-1,[0,0,0],[0,0,0],0,0,0,0,0,-1])" << "\n";
  EXPECT_NE(error_of(path).find("line 2: name record needs 3 fields, has 17"), std::string::npos) << error_of(path);
  std::ofstream(path) << R"({"format":"gearshift-trace","version":1})" << "\n" << R"(["m","step",0,10])" << "\n";
  EXPECT_NE(error_of(path).find("line 2: marker record needs 5 fields, has 4"), std::string::npos) << error_of(path);
  // A header of the wrong types is a bad input, not an escaped json::type_error.
  std::ofstream(path) << R"({"format":"gearshift-trace","version":"1"})" << "\n";
  EXPECT_NE(error_of(path).find("line 1: bad header:"), std::string::npos) << error_of(path);
  std::remove(path.c_str());
}

TEST(GearshiftFormat, SynchronizesRoundTrip) {
  std::string path = temp_path("sync.gstrace.gz");
  Trace in = sample();
  SyncRecord y;
  y.scope = SyncRecord::Scope::stream;
  y.device = 0;
  y.stream = 7;
  y.correlation = 77;
  y.enter_ns = 1'000'020'000;
  y.duration_ns = 3'500'000;
  SyncRecord d;  // written out of order: the reader sorts by entry
  d.correlation = 12;
  d.enter_ns = 999'500'000;
  d.duration_ns = 0;
  in.syncs = {y, d};
  in.syncs_recorded = true;
  write_gearshift_trace(in, path);
  Trace out = import_trace(path);
  EXPECT_TRUE(out.complete);
  EXPECT_TRUE(out.syncs_recorded);
  ASSERT_EQ(out.syncs.size(), 2u);
  EXPECT_EQ(out.syncs[0].scope, SyncRecord::Scope::device);
  EXPECT_EQ(out.syncs[0].device, -1);
  EXPECT_EQ(out.syncs[0].stream, -1);
  EXPECT_EQ(out.syncs[0].correlation, 12);
  EXPECT_EQ(out.syncs[0].enter_ns, 999'500'000);
  const SyncRecord& s = out.syncs[1];
  EXPECT_EQ(s.scope, SyncRecord::Scope::stream);
  EXPECT_EQ(s.device, 0);
  EXPECT_EQ(s.stream, 7);
  EXPECT_EQ(s.correlation, 77);
  EXPECT_EQ(s.enter_ns, 1'000'020'000);
  EXPECT_EQ(s.exit_ns(), 1'003'520'000);
  // A producer that does not record them says so, and the reader keeps that apart from "none happened".
  in.syncs.clear();
  in.syncs_recorded = false;
  write_gearshift_trace(in, path);
  out = import_trace(path);
  EXPECT_FALSE(out.syncs_recorded);
  std::remove(path.c_str());
}

TEST(GearshiftFormat, Version1FilesStayReadableWithoutSynchronizes) {
  std::string path = temp_path("v1.gstrace");
  std::ofstream(path) << R"({"format":"gearshift-trace","version":1})" << "\n"
                      << R"(["n",0,"k"])" << "\n"
                      << R"(["k",0,100,10,0,7,5,[1,1,1],[1,1,1],0,0,0,0,0,-1])" << "\n"
                      << R"(["end",{"complete":true,"records":1,"dropped_records":0}])" << "\n";
  Trace t = read_gearshift_trace(path);
  EXPECT_EQ(t.format, "gearshift-trace v1");
  EXPECT_EQ(t.ops.size(), 1u);
  EXPECT_FALSE(t.syncs_recorded);  // no trailer flag: an older tracer, which did not write them
  // "y" records are additive within version 1 (like "p" and "g"): they read, and the trailer says all were kept.
  std::ofstream(path) << R"({"format":"gearshift-trace","version":1})" << "\n"
                      << R"(["y","device",-1,-1,3,100,5])" << "\n"
                      << R"(["end",{"complete":true,"records":1,"dropped_records":0,"synchronizes":true}])" << "\n";
  EXPECT_TRUE(read_gearshift_trace(path).syncs_recorded);
  EXPECT_EQ(read_gearshift_trace(path).syncs.size(), 1u);
  std::ofstream(path) << R"({"format":"gearshift-trace","version":1})" << "\n"
                      << R"(["y","context",-1,-1,3,100,5])" << "\n";
  EXPECT_NE(error_of(path).find("synchronize scope 'context'"), std::string::npos) << error_of(path);
  std::ofstream(path) << R"({"format":"gearshift-trace","version":1})" << "\n" << R"(["y","device",-1,-1,3,100])" << "\n";
  EXPECT_NE(error_of(path).find("synchronize record needs 7 fields, has 6"), std::string::npos) << error_of(path);
  std::ofstream(path) << R"({"format":"gearshift-trace","version":1})" << "\n" << R"(["y","device",-1,-1,3,100,-5])" << "\n";
  EXPECT_NE(error_of(path).find("negative synchronize duration"), std::string::npos) << error_of(path);
  std::ofstream(path) << R"({"format":"gearshift-trace","version":1})" << "\n"
                      << R"(["end",{"complete":true,"records":0,"synchronizes":1}])" << "\n";
  EXPECT_NE(error_of(path).find("trailer 'synchronizes' is not true or false"), std::string::npos) << error_of(path);
  std::ofstream(path) << R"({"format":"gearshift-trace","version":3})" << "\n";
  EXPECT_NE(error_of(path).find("unsupported gearshift trace version 3 (this build reads 1 to 1)"), std::string::npos)
      << error_of(path);
  std::remove(path.c_str());
}

TEST(GearshiftFormat, WriterReportsAnUnwritablePath) {
  GearshiftTraceWriter w("/nonexistent-dir/x.gz", "unit", "");
  EXPECT_FALSE(w.ok());
  EXPECT_NE(w.error().find("cannot open"), std::string::npos);
}

}  // namespace
}  // namespace gearshift::trace

namespace gearshift::trace {
namespace {

// A file that is not a trace says what it is where its first bytes tell (issue 46: a Chakra execution trace read as
// "no kernel events among 0 events", a CSV as "not valid JSON ... last read: 's'").
TEST(ImportTrace, AFileThatIsNotATraceSaysWhatItIs) {
  EXPECT_EQ(what_file_is(""), "");
  EXPECT_EQ(what_file_is("{\"traceEvents\": []}"), "");
  EXPECT_EQ(what_file_is("\xEF\xBB\xBF\r\n  [ {\"ph\": \"X\"} ]"), "");
  EXPECT_EQ(what_file_is("{\"format\":\"gearshift-trace\",\"version\":1}"), "");
  EXPECT_NE(what_file_is("{\"schema\": \"1.0.3-chakra.0.0.4\", \"pid\": 7, \"nodes\": [").find("PyTorch execution trace"),
            std::string::npos);
  std::string tar(600, '\0');
  tar.replace(0, 10, "trace.json");
  tar.replace(257, 5, "ustar");
  EXPECT_NE(what_file_is(tar).find("a tar archive"), std::string::npos);
  EXPECT_NE(what_file_is(std::string("PK\x03\x04\x14\x00", 6)).find("a zip archive"), std::string::npos);
  EXPECT_NE(what_file_is("SQLite format 3").find("SQLite"), std::string::npos);
  EXPECT_NE(what_file_is(std::string("\x0a\x05\x08\x01\x00\x12", 6)).find("binary data"), std::string::npos);
  EXPECT_EQ(what_file_is("stage,instruction,frequency,time,energy\n0,forward,1410,0.1,20\n"),
            "text that is not JSON (it begins 'stage,instruction,frequency,time,energy': a CSV? `gearshift pipeline` "
            "reads stage profiles)");
  // Through the reader: the file's path and the words.
  const std::string p = temp_path("profile.csv");
  {
    std::ofstream f(p);
    f << "stage,instruction,frequency,time,energy\n";
  }
  try {
    import_trace(p);
    FAIL() << "a CSV was read as a trace";
  } catch (const TraceError& e) {
    EXPECT_NE(std::string(e.what()).find("not a trace: text that is not JSON"), std::string::npos) << e.what();
  }
  std::remove(p.c_str());
}

}  // namespace
}  // namespace gearshift::trace
