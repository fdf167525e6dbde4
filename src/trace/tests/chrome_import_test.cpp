#include "trace/chrome_import.hpp"

#include <gtest/gtest.h>
#include <zlib.h>

#include <cstdio>
#include <filesystem>
#include <fstream>

#include "trace/error.hpp"
#include "trace/gearshift_format.hpp"
#include "test_paths.hpp"

namespace gearshift::trace {
namespace {

class TempFile {
 public:
  explicit TempFile(const std::string& suffix) {
    static int counter = 0;
    path_ = (std::filesystem::temp_directory_path() /
             ("gearshift_test_" + std::to_string(::getpid()) + "_" + std::to_string(counter++) + suffix))
                .string();
  }
  ~TempFile() { std::remove(path_.c_str()); }
  const std::string& path() const { return path_; }
  void write(const std::string& text) const { std::ofstream(path_, std::ios::binary) << text; }
  void write_gz(const std::string& text) const {
    gzFile f = gzopen(path_.c_str(), "wb");
    gzwrite(f, text.data(), static_cast<unsigned>(text.size()));
    gzclose(f);
  }

 private:
  std::string path_;
};

std::string kernel_event(const std::string& ts, const std::string& dur, const std::string& extra = "") {
  return R"({"ph":"X","cat":"kernel","name":"k1","pid":0,"tid":7,"ts":)" + ts + R"(,"dur":)" + dur +
         R"(,"args":{"device":0,"stream":7,"correlation":5,"grid":[8,2,1],"block":[256,1,1],)"
         R"("registers per thread":32,"shared memory":1024)" + extra + "}}";
}

std::string error_of(const std::string& path) {
  try {
    import_chrome_trace(path);
  } catch (const TraceError& e) {
    return e.what();
  }
  return "";
}

TEST(ChromeImport, TheOpsOfOneGraphLaunchAreOneUnit) {
  // Three kernels of one cudaGraphLaunch (correlation 9), one of a cudaLaunchKernel (10). Held the wrong value:
  // no graph id, so a plan changed clocks inside the launch.
  auto k = [](const std::string& name, const std::string& ts, int corr) {
    return R"({"ph":"X","cat":"kernel","name":")" + name + R"(","pid":0,"tid":7,"ts":)" + ts +
           R"(,"dur":1.0,"args":{"device":0,"stream":7,"correlation":)" + std::to_string(corr) + "}}";
  };
  auto api = [](const std::string& name, const std::string& ts, int corr) {
    return R"({"ph":"X","cat":"cuda_runtime","name":")" + name + R"(","pid":1,"tid":1,"ts":)" + ts +
           R"(,"dur":2.0,"args":{"correlation":)" + std::to_string(corr) + "}}";
  };
  TempFile f(".json");
  f.write(R"({"traceEvents":[)" + api("cudaGraphLaunch", "1", 9) + "," + api("cudaLaunchKernel", "4", 10) + "," +
          k("a", "10", 9) + "," + k("b", "12", 9) + "," + k("c", "14", 9) + "," + k("d", "16", 10) + "]}");
  const Trace t = import_chrome_trace(f.path());
  ASSERT_EQ(t.ops.size(), 4u);
  EXPECT_EQ(t.ops[0].graph_id, 1u);
  EXPECT_EQ(t.ops[1].graph_id, 1u);
  EXPECT_EQ(t.ops[2].graph_id, 1u);
  EXPECT_EQ(t.ops[3].graph_id, 0u);
  // Without a graph launch call, a shared correlation id is no graph (exporters repeat ids).
  TempFile g(".json");
  g.write(R"({"traceEvents":[)" + k("a", "10", 5) + "," + k("b", "12", 5) + "]}");
  const Trace u = import_chrome_trace(g.path());
  EXPECT_EQ(u.ops[0].graph_id, 0u);
  EXPECT_EQ(u.ops[1].graph_id, 0u);
}

TEST(ChromeImport, ReadsKernelFieldsAndExactNanoseconds) {
  TempFile f(".json");
  f.write(R"({"traceEvents":[)" + kernel_event("5154843553616.174", "20.16") + "," +
          R"J({"ph":"X","cat":"gpu_memset","name":"Memset (Device)","pid":0,"tid":7,"ts":5154843554340.591,"dur":0.768,"args":{"stream":7,"bytes":4}})J" +
          R"(],"meta":{"s_per_iter":0.2026,"J_per_iter":135.385,"model":"gpt3xl"}})");
  Trace t = import_chrome_trace(f.path());
  ASSERT_EQ(t.ops.size(), 2u);
  const OpRecord& k = t.ops[0];
  EXPECT_EQ(k.kind, OpKind::kernel);
  EXPECT_EQ(t.name_of(k), "k1");
  EXPECT_EQ(k.start_ns, 5154843553616174);
  EXPECT_EQ(k.duration_ns, 20160);
  EXPECT_EQ(k.stream, 7);
  EXPECT_EQ(k.correlation, 5);
  EXPECT_EQ(k.grid, (std::array<std::int32_t, 3>{8, 2, 1}));
  EXPECT_EQ(k.block[0], 256);
  EXPECT_EQ(k.registers_per_thread, 32);
  EXPECT_EQ(k.shared_memory_bytes, 1024);
  EXPECT_EQ(t.ops[1].kind, OpKind::memset);
  EXPECT_EQ(t.ops[1].duration_ns, 768);
  EXPECT_EQ(t.ops[1].bytes, 4);
  ASSERT_TRUE(t.measured.energy_per_step_j.has_value());
  EXPECT_DOUBLE_EQ(*t.measured.energy_per_step_j, 135.385);
  EXPECT_DOUBLE_EQ(*t.measured.step_time_s, 0.2026);
}

TEST(ChromeImport, ReadsGzipAndTheBareArrayFormatWithStringTid) {
  TempFile f(".json.gz");
  f.write_gz(R"([{"ph":"X","cat":"Kernel","name":"k","pid":0,"tid":"stream 13","ts":100,"dur":5,"args":{}}])");
  Trace t = import_chrome_trace(f.path());
  ASSERT_EQ(t.ops.size(), 1u);
  EXPECT_EQ(t.ops[0].stream, 13);
  EXPECT_EQ(t.ops[0].start_ns, 100000);
}

TEST(ChromeImport, MapsKernelsToLaunchTimesThroughCorrelation) {
  TempFile f(".json");
  f.write(R"({"traceEvents":[{"ph":"X","cat":"cuda_runtime","name":"cudaLaunchKernel","ts":90,"dur":3,"args":{"correlation":5}},)" +
          kernel_event("100", "1") + "]}");
  Trace t = import_chrome_trace(f.path());
  EXPECT_EQ(t.ops[0].launch_ns, 90000);
}

// torch.optim's profiler hook ranges ("Optimizer.step#<class>.step") are kept apart from the step markers: they are
// evidence of the update (trace/step/evidence.cpp), never a step boundary; a GPU annotation of that name is
// neither.
TEST(ChromeImport, KeepsTheOptimizerStepAnnotationsApartFromTheStepMarkers) {
  TempFile f(".json");
  f.write(R"({"traceEvents":[{"ph":"X","cat":"user_annotation","name":"Optimizer.step#Adafactor.step","ts":300,"dur":40},)"
          R"({"ph":"X","cat":"cpu_op","name":"Optimizer.step#Adafactor.step","ts":200,"dur":40},)"
          R"({"ph":"X","cat":"gpu_user_annotation","name":"Optimizer.step#Adafactor.step","ts":210,"dur":40},)"
          R"({"ph":"X","cat":"user_annotation","name":"ProfilerStep#3","ts":50,"dur":400},)" +
          kernel_event("100", "1") + "]}");
  Trace t = import_chrome_trace(f.path());
  ASSERT_EQ(t.optimizer_ranges.size(), 2u);
  EXPECT_EQ(t.optimizer_ranges[0].start_ns, 200000);  // sorted
  EXPECT_EQ(t.optimizer_ranges[1].start_ns, 300000);
  ASSERT_EQ(t.markers.size(), 1u);
  EXPECT_EQ(t.markers[0].name, "ProfilerStep#3");
}

// What the profiler itself recorded on the CPU side (trace::ProfilerRecords, issue 46): its CPU ops (user
// annotations, not GPU ones), runtime calls, Python frames (with_stack) and "Input Dims" (record_shapes), and the
// span of their starts.
TEST(ChromeImport, CountsTheProfilersOwnCpuRecords) {
  TempFile f(".json");
  f.write(R"({"traceEvents":[{"ph":"X","cat":"cpu_op","name":"aten::mm","ts":100,"dur":5,"args":{"Input Dims":[[2,3],[3,4]]}},)"
          R"({"ph":"X","cat":"cpu_op","name":"aten::add","ts":120,"dur":5},)"
          R"({"ph":"X","cat":"user_annotation","name":"ProfilerStep#1","ts":90,"dur":400},)"
          R"({"ph":"X","cat":"gpu_user_annotation","name":"ProfilerStep#1","ts":95,"dur":400},)"
          R"({"ph":"X","cat":"python_function","name":"train.py(10): step","ts":91,"dur":300},)"
          R"({"ph":"X","cat":"cuda_runtime","name":"cudaLaunchKernel","ts":130,"dur":4,"args":{"correlation":1}},)" +
          kernel_event("140", "1") + "]}");
  Trace t = import_chrome_trace(f.path());
  EXPECT_EQ(t.profiler.cpu_ops, 3);  // two ops and the step annotation; the GPU one is not the CPU's
  EXPECT_EQ(t.profiler.runtime_calls, 1);
  EXPECT_EQ(t.profiler.python_functions, 1);
  EXPECT_TRUE(t.profiler.shapes);
  EXPECT_EQ(t.profiler.first_ns, 90000);
  EXPECT_EQ(t.profiler.last_ns, 130000);
  // Without them: nothing counted.
  TempFile g(".json");
  g.write(R"({"traceEvents":[)" + kernel_event("140", "1") + "]}");
  const Trace u = import_chrome_trace(g.path());
  EXPECT_EQ(u.profiler.cpu_ops + u.profiler.runtime_calls + u.profiler.python_functions, 0);
  EXPECT_FALSE(u.profiler.shapes);
}

// torch.profiler keeps the job's synchronizes as CUDA runtime events; the driver's synchronize inside a runtime
// one is the same wait and is not counted twice.
TEST(ChromeImport, MapsRuntimeSynchronizesToSyncRecords) {
  TempFile f(".json");
  f.write(R"({"traceEvents":[{"ph":"X","cat":"cuda_runtime","name":"cudaLaunchKernel","ts":90,"dur":3,"args":{"correlation":5}},)" +
          kernel_event("100", "1") +
          R"(,{"ph":"X","cat":"cuda_runtime","name":"cudaStreamSynchronize","pid":495,"tid":495,"ts":95.5,"dur":7.25,"args":{"correlation":9,"cbid":131}})"
          R"(,{"ph":"X","cat":"cuda_driver","name":"cuStreamSynchronize","ts":96,"dur":6,"args":{"correlation":10}})"
          R"(,{"ph":"X","cat":"cuda_runtime","name":"cudaEventSynchronize","ts":120,"dur":1,"args":{"correlation":12}})"
          R"(,{"ph":"X","cat":"cuda_driver","name":"cuCtxSynchronize","ts":130,"dur":2,"args":{"correlation":14}})"
          R"(,{"ph":"X","cat":"cuda_runtime","name":"cudaDeviceSynchronize","ts":110,"dur":0.5,"args":{"correlation":11}}]})");
  Trace t = import_chrome_trace(f.path());
  EXPECT_TRUE(t.syncs_recorded);
  ASSERT_EQ(t.syncs.size(), 4u);  // the nested cuStreamSynchronize left out; sorted by entry
  EXPECT_EQ(t.syncs[0].scope, SyncRecord::Scope::stream);
  EXPECT_EQ(t.syncs[0].correlation, 9);
  EXPECT_EQ(t.syncs[0].enter_ns, 95500);
  EXPECT_EQ(t.syncs[0].duration_ns, 7250);
  EXPECT_EQ(t.syncs[0].exit_ns(), 102750);
  EXPECT_EQ(t.syncs[0].device, -1);
  EXPECT_EQ(t.syncs[1].scope, SyncRecord::Scope::device);
  EXPECT_EQ(t.syncs[1].enter_ns, 110000);
  EXPECT_EQ(t.syncs[2].scope, SyncRecord::Scope::event);
  EXPECT_EQ(t.syncs[3].scope, SyncRecord::Scope::device);  // a driver synchronize on its own counts
  EXPECT_EQ(t.syncs[3].correlation, 14);
  EXPECT_EQ(t.ops[0].launch_ns, 90000);  // the launches are still mapped
  // Without CUDA runtime events the trace cannot say whether the job synchronized.
  TempFile g(".json");
  g.write(R"({"traceEvents":[)" + kernel_event("100", "1") + "]}");
  EXPECT_FALSE(import_chrome_trace(g.path()).syncs_recorded);
}

TEST(ChromeImport, BadInputGetsOneLineNamingFileAndPosition) {
  TempFile missing(".json");
  EXPECT_NE(error_of(missing.path()).find("cannot open"), std::string::npos);

  TempFile not_json(".json");
  not_json.write("hello world");
  std::string e = error_of(not_json.path());
  EXPECT_NE(e.find(not_json.path()), std::string::npos) << e;
  EXPECT_NE(e.find("byte"), std::string::npos) << e;

  TempFile truncated(".json");
  truncated.write(R"({"traceEvents":[)" + kernel_event("1", "2"));
  e = error_of(truncated.path());
  EXPECT_NE(e.find("truncated"), std::string::npos) << e;

  TempFile truncated_gz(".json.gz");
  {
    std::string body = R"({"traceEvents":[)";
    for (int i = 0; i < 2000; ++i) body += kernel_event(std::to_string(i * 10), "2") + ",";
    body += kernel_event("99999", "1") + "]}";
    TempFile whole(".json.gz");
    whole.write_gz(body);
    std::ifstream in(whole.path(), std::ios::binary);
    std::string bytes((std::istreambuf_iterator<char>(in)), {});
    truncated_gz.write(bytes.substr(0, bytes.size() / 2));
  }
  e = error_of(truncated_gz.path());
  EXPECT_NE(e.find("byte"), std::string::npos) << e;
  EXPECT_TRUE(e.find("truncated") != std::string::npos || e.find("gzip") != std::string::npos) << e;

  TempFile no_dur(".json");
  no_dur.write(R"({"traceEvents":[{"ph":"X","cat":"kernel","name":"k","ts":5}]})");
  e = error_of(no_dur.path());
  EXPECT_NE(e.find("without dur"), std::string::npos) << e;
  EXPECT_NE(e.find("event 0"), std::string::npos) << e;

  TempFile negative(".json");
  negative.write(R"({"traceEvents":[)" + kernel_event("1", "2") + "," + kernel_event("5", "-3") + "]}");
  e = error_of(negative.path());
  EXPECT_NE(e.find("negative duration"), std::string::npos) << e;
  EXPECT_NE(e.find("event 1"), std::string::npos) << e;

  TempFile absurd(".json");
  absurd.write(R"({"traceEvents":[)" + kernel_event("1", "7200000000") + "]}");
  EXPECT_NE(error_of(absurd.path()).find("absurd duration"), std::string::npos);

  TempFile huge_ts(".json");
  huge_ts.write(R"({"traceEvents":[)" + kernel_event("99999999999999999999999", "1") + "]}");
  EXPECT_NE(error_of(huge_ts.path()).find("absurd timestamp"), std::string::npos);

  TempFile no_kernels(".json");
  no_kernels.write(R"({"traceEvents":[{"ph":"X","cat":"cpu_op","name":"aten::mm","ts":1,"dur":2}]})");
  EXPECT_NE(error_of(no_kernels.path()).find("no kernel events among 1 events"), std::string::npos);
}

std::string body_with(const std::string& events) { return R"({"traceEvents":[)" + events + "]}"; }

TEST(ChromeImport, InvalidUtf8InANameIsReplacedAndCounted) {
  // kineto#80: bytes e9 ff fe inside a kernel name; nlohmann-json alone rejects the file.
  TempFile f(".json.gz");
  std::string bad = kernel_event("1", "2");
  bad.replace(bad.find("\"k1\""), 4, "\"nvjet\xE9\xFF\xFE" "90\"");
  f.write_gz(body_with(bad + "," + kernel_event("5", "2")));
  Trace t = import_chrome_trace(f.path());
  ASSERT_EQ(t.ops.size(), 2u);
  EXPECT_EQ(t.name_of(t.ops[0]), "nvjet\xEF\xBF\xBD\xEF\xBF\xBD\xEF\xBF\xBD" "90");
  EXPECT_EQ(t.name_of(t.ops[1]), "k1");
  std::size_t at = body_with(bad).find('\xE9') + 1;
  ASSERT_EQ(t.health.warnings.size(), 1u);
  EXPECT_EQ(t.health.warnings[0],
            "3 invalid UTF-8 bytes in names or other strings replaced by U+FFFD (first at byte " + std::to_string(at) + ")");
}

TEST(ChromeImport, PositionsAfterAReplacementCountTheFileBytes) {
  // Two replaced bytes, then a raw control character: the error names its byte in the file, not in the
  // (longer) repaired text.
  TempFile f(".json");
  std::string text = body_with("{\"name\":\"a\xE9\xE9\",\"cat\":\"cpu_op\"},{\"name\":\"x\x01\"}");
  f.write(text);
  std::string e = error_of(f.path());
  EXPECT_NE(e.find("byte " + std::to_string(text.find('\x01') + 1) + ": not valid JSON"), std::string::npos) << e;
  EXPECT_NE(e.find("control character U+0001"), std::string::npos) << e;
  EXPECT_EQ(e.find("column"), std::string::npos) << e;  // nlohmann's column counts the repaired text

  // Multi-line files also get the line; the position is the last byte of the token that broke the syntax.
  TempFile pretty(".json");
  std::string lines = "{\n  \"traceEvents\": [\n    {\"name\": \"k\xE9\"},\n    {\"ph\": \"X\" \"cat\": 1}\n  ]\n}\n";
  pretty.write(lines);
  e = error_of(pretty.path());
  EXPECT_NE(e.find("byte " + std::to_string(lines.find("\"cat\"") + 5) + " (line 4): not valid JSON"), std::string::npos) << e;
}

TEST(ChromeImport, DataAfterTheDocumentIsNotCalledTruncation) {
  TempFile f(".json.gz");
  std::string doc = body_with(kernel_event("1", "2"));
  f.write_gz(doc + "\n{\"traceEvents\": [");
  EXPECT_EQ(error_of(f.path()), f.path() + ": data after the end of the JSON document at byte " +
                                    std::to_string(doc.size() + 2) + " (the document ends at byte " +
                                    std::to_string(doc.size()) + ")");
  TempFile ws(".json");  // white space after the document is fine
  ws.write(doc + " \r\n\t\n");
  EXPECT_EQ(import_chrome_trace(ws.path()).ops.size(), 1u);
}

TEST(ChromeImport, AnEmptyFileSaysSo) {
  TempFile empty(".json");
  empty.write("");
  EXPECT_EQ(error_of(empty.path()), empty.path() + ": empty file");
  TempFile empty_gz(".json.gz");
  empty_gz.write_gz("");
  EXPECT_EQ(error_of(empty_gz.path()), empty_gz.path() + ": empty file (gzip of nothing)");
  TempFile blank(".json");
  blank.write(" \n\n");
  EXPECT_EQ(error_of(blank.path()), blank.path() + ": byte 4: no JSON value in the file (only white space)");
}

TEST(ChromeImport, NumericStringTimesReadExactlyLikeNumbers) {
  // Ascend/pytorch#133: "ts": "5154861704176.982".
  TempFile f(".json");
  std::string ev = kernel_event(R"("5154861704176.982")", R"("20.16")") + "," + kernel_event(R"("100")", "1.5");
  f.write(body_with(ev));
  Trace t = import_chrome_trace(f.path());
  ASSERT_EQ(t.ops.size(), 2u);
  EXPECT_EQ(t.ops[0].start_ns, 100000);
  EXPECT_EQ(t.ops[0].duration_ns, 1500);
  EXPECT_EQ(t.ops[1].start_ns, 5154861704176982);
  EXPECT_EQ(t.ops[1].duration_ns, 20160);
  ASSERT_EQ(t.health.warnings.size(), 1u);
  EXPECT_EQ(t.health.warnings[0], "2 GPU ops and step markers give ts or dur as a string (read as the number it spells)");

  for (const char* bad : {R"("5154861704176.982 µs")", R"("")", R"("1e")", R"(" 12")", R"("+12")", R"("0x10")"}) {
    TempFile g(".json");
    g.write(body_with(kernel_event(bad, "1")));
    std::string e = error_of(g.path());
    EXPECT_NE(e.find("event 0 (near byte"), std::string::npos) << e;
    EXPECT_NE(e.find("ts is a string that is not a number"), std::string::npos) << e;
  }
}

TEST(ChromeImport, NanAndInfinityAreNamed) {
  const std::pair<const char*, const char*> cases[] = {
      {"NaN", "dur is NaN (not valid JSON"}, {"Infinity", "dur is Infinity"}, {"-Infinity", "dur is -Infinity"}};
  for (auto [literal, words] : cases) {
    TempFile f(".json");
    std::string text = body_with(kernel_event("1", "2") + "," + kernel_event("5", literal));
    f.write(text);
    std::string e = error_of(f.path());
    EXPECT_NE(e.find(words), std::string::npos) << e;
    EXPECT_NE(e.find("event 1"), std::string::npos) << e;
    // The parser stops at the N or I (after the minus sign).
    std::size_t at = text.rfind(literal) + 1 + (literal[0] == '-' ? 1 : 0);
    EXPECT_NE(e.find("byte " + std::to_string(at) + ": event 1: "), std::string::npos) << e;
  }
  TempFile other(".json");  // any other bad literal keeps nlohmann's reason
  other.write(body_with(kernel_event("1", "Nope")));
  EXPECT_NE(error_of(other.path()).find("not valid JSON: syntax error"), std::string::npos);
}

TEST(ChromeImport, ZeroTimeEventsAreKeptForTheSanitizer) {
  // kineto#109 / pytorch#188481: ts 0 and dur 0. import_chrome_trace keeps them; sanitize_trace drops them.
  TempFile f(".json");
  f.write(body_with(kernel_event("0", "0") + "," + kernel_event("0.000", "0.000") + "," + kernel_event("7", "1")));
  Trace t = import_chrome_trace(f.path());
  ASSERT_EQ(t.ops.size(), 3u);
  EXPECT_EQ(t.ops[0].start_ns, 0);
  EXPECT_EQ(t.ops[0].duration_ns, 0);
  EXPECT_EQ(t.ops[1].start_ns, 0);
  EXPECT_EQ(t.ops[1].duration_ns, 0);
  EXPECT_TRUE(t.health.warnings.empty());
}

// Bad inputs in ../shared/data/bad_inputs (README.md there gives the expected result of each).
std::string bad_input(const std::string& name) { return test::shared_path("data/bad_inputs/" + name); }

std::string shared_error(const std::string& name) { return error_of(bad_input(name)); }

TEST(ChromeImportBadInputs, NonUtf8KernelNameIsPlannedAsBase) {
  if (!test::have_shared()) GTEST_SKIP() << "../shared/data absent in this checkout";
  Trace base = import_chrome_trace(test::shared_path("data/traces/gpt2_h200_trace.json.gz"));
  Trace t = import_chrome_trace(bad_input("i02_gpt2_nonutf8_kernel_name.json.gz"));
  ASSERT_EQ(t.ops.size(), base.ops.size());
  EXPECT_EQ(t.kernel_count(), 3u * 805u);
  std::size_t renamed = 0;
  for (std::size_t i = 0; i < t.ops.size(); ++i) {
    EXPECT_EQ(t.ops[i].start_ns, base.ops[i].start_ns);
    if (t.name_of(t.ops[i]) != base.name_of(base.ops[i])) {
      ++renamed;
      EXPECT_NE(t.name_of(t.ops[i]).find("\xEF\xBF\xBD\xEF\xBF\xBD\xEF\xBF\xBD"), std::string::npos);
    }
  }
  EXPECT_EQ(renamed, 1u);
  ASSERT_EQ(t.health.warnings.size(), 1u);
  EXPECT_EQ(t.health.warnings[0], "3 invalid UTF-8 bytes in names or other strings replaced by U+FFFD (first at byte 4872)");
}

TEST(ChromeImportBadInputs, TsAsStringsGiveTheSameNanoseconds) {
  if (!test::have_shared()) GTEST_SKIP() << "../shared/data absent in this checkout";
  Trace base = import_chrome_trace(test::shared_path("data/traces/gpt2_h200_trace.json.gz"));
  Trace t = import_chrome_trace(bad_input("i30_gpt2_ts_as_strings.json.gz"));
  ASSERT_EQ(t.ops.size(), base.ops.size());
  for (std::size_t i = 0; i < t.ops.size(); ++i) {
    ASSERT_EQ(t.ops[i].start_ns, base.ops[i].start_ns) << i;
    ASSERT_EQ(t.ops[i].duration_ns, base.ops[i].duration_ns) << i;
  }
  EXPECT_EQ(t.markers.size(), base.markers.size());
  ASSERT_EQ(t.health.warnings.size(), 1u);
  EXPECT_NE(t.health.warnings[0].find("give ts or dur as a string"), std::string::npos);
}

TEST(ChromeImportBadInputs, EachRefusalSaysWhatAndWhere) {
  if (!test::have_shared()) GTEST_SKIP() << "../shared/data absent in this checkout";
  const std::pair<const char*, const char*> cases[] = {
      {"i03_gpt2_raw_control_chars_in_name.json.gz",
       "byte 4872: not valid JSON: syntax error while parsing value - invalid string: control character U+0001"},
      {"i15b_gpt2_lone_surrogate_escape.json.gz",
       "byte 4873: not valid JSON: syntax error while parsing value - invalid string: surrogate U+D800..U+DBFF"},
      {"i18_gpt2_trailing_garbage.json.gz",
       "data after the end of the JSON document at byte 1739483 (the document ends at byte 1739481)"},
      {"i09_empty.json", "i09_empty.json: empty file"},
      {"i11_empty.json.gz", "i11_empty.json.gz: empty file"},
      {"i11b_gzip_of_nothing.json.gz", "i11b_gzip_of_nothing.json.gz: empty file (gzip of nothing)"},
      {"i21_gpt2_nan_dur.json.gz", "byte 6938: event 11: dur is NaN (not valid JSON"},
      {"i08c_gpt2_cut_after_event.json.gz", "file ends in the middle of the JSON (truncated?)"},
      {"i10_directory.json.gz", "i10_directory.json.gz: is a directory, not a trace file"},
  };
  for (auto [file, words] : cases) {
    std::string e = shared_error(file);
    EXPECT_NE(e.find(words), std::string::npos) << file << ": " << e;
  }
  EXPECT_EQ(shared_error("i18_gpt2_trailing_garbage.json.gz").find("truncated"), std::string::npos);
}

TEST(ChromeImport, ReadsEveryPublicTrace) {
  if (!test::have_shared()) GTEST_SKIP() << "../shared/data absent in this checkout";
  struct Case {
    const char* file;
    std::size_t kernels;
  };
  // Kernel counts as Python's json module counts them (cat kernel/Kernel).
  const Case cases[] = {
      {"facebookresearch_HolisticTraceAnalysis/tests/data/df_index_resolver/df_index_resolver.json.gz", 19370},
      {"facebookresearch_HolisticTraceAnalysis/tests/data/ns_resolution_trace/rank-0.Apr_03_18_51_38.1102.pt.trace.json.gz", 4350},
      {"facebookresearch_HolisticTraceAnalysis/tests/data/trace_file_list/inference_rank_1.json.gz", 4},
      {"facebookresearch_HolisticTraceAnalysis/tests/data/large_integer_trace/rank-70.Mar_25_20_48_12.2861.pt.trace.json.gz", 1},
      {"facebookresearch_param/et_replay/tests/inputs/resnet_kineto.json.gz", 9628},
      {"pytorch_kineto/tb_plugin/samples/resnet50_num_workers_0/worker0.pt.trace.json.gz", 9538},
      {"pytorch_kineto/tb_plugin/samples/resnet50_num_workers_0/worker0.1623143566756.pt.trace.json.gz", 8772},
  };
  for (const auto& c : cases) {
    Trace t = import_trace(test::shared_path(std::string("data/public_traces/") + c.file));
    EXPECT_EQ(t.kernel_count(), c.kernels) << c.file;
    EXPECT_TRUE(std::is_sorted(t.ops.begin(), t.ops.end(),
                               [](auto& a, auto& b) { return a.start_ns < b.start_ns; }))
        << c.file;
  }
}

}  // namespace
}  // namespace gearshift::trace
