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
