#include <gtest/gtest.h>

#include <fstream>
#include <sstream>

#include <httplib.h>

#include "monitor/export.hpp"
#include "monitor/prometheus_server.hpp"

namespace gearshift::monitor {
namespace {

std::vector<GpuSample> samples() {
  GpuSample s;
  s.gpu = 0;
  s.t = 2'500'000'000;
  s.energy_counter_mj = 123456;
  s.energy_j = 42.5;
  s.power_w = 301.25;
  s.sm_clock_mhz = 1980;
  s.mem_clock_mhz = 3201;
  s.temperature_c = 45;
  s.clock_event_reasons = 4;
  GpuSample t;
  t.gpu = 1;
  t.t = 2'500'000'000;
  t.power_w = 80;  // no counter, no clocks
  return {s, t};
}

std::vector<gpu::DeviceInfo> infos() {
  return {gpu::DeviceInfo{0, "NVIDIA H200", "GPU-abc", "00000000:18:00.0", false},
          gpu::DeviceInfo{1, "NVIDIA H200", "GPU-def", "00000000:2A:00.0", false}};
}

TEST(Prometheus, DcgmStyleLines) {
  std::string text = prometheus_text(samples(), infos());
  const std::string labels0 = "{gpu=\"0\",UUID=\"GPU-abc\",pci_bus_id=\"00000000:18:00.0\",device=\"nvidia0\","
                              "modelName=\"NVIDIA H200\"}";
  EXPECT_NE(text.find("# TYPE DCGM_FI_DEV_POWER_USAGE gauge\n"), std::string::npos);
  EXPECT_NE(text.find("DCGM_FI_DEV_POWER_USAGE" + labels0 + " 301.25\n"), std::string::npos) << text;
  EXPECT_NE(text.find("DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION" + labels0 + " 123456\n"), std::string::npos);
  EXPECT_NE(text.find("DCGM_FI_DEV_SM_CLOCK" + labels0 + " 1980\n"), std::string::npos);
  EXPECT_NE(text.find("DCGM_FI_DEV_MEM_CLOCK" + labels0 + " 3201\n"), std::string::npos);
  EXPECT_NE(text.find("DCGM_FI_DEV_GPU_TEMP" + labels0 + " 45\n"), std::string::npos);
  EXPECT_NE(text.find("DCGM_FI_DEV_CLOCKS_EVENT_REASONS" + labels0 + " 4\n"), std::string::npos);
  EXPECT_NE(text.find("DCGM_FI_DEV_POWER_USAGE{gpu=\"1\""), std::string::npos);
  EXPECT_EQ(text.find("DCGM_FI_DEV_SM_CLOCK{gpu=\"1\""), std::string::npos);  // unread: left out
}

TEST(SampleLog, CsvAndJsonl) {
  std::string csv = ::testing::TempDir() + "samples.csv", jsonl = ::testing::TempDir() + "samples.jsonl";
  {
    SampleLog c(csv, SampleLog::Format::kCsv, 500'000'000);
    SampleLog j(jsonl, SampleLog::Format::kJsonl, 500'000'000);
    for (const auto& s : samples()) {
      c.write(s);
      j.write(s);
    }
  }
  std::ifstream c(csv), j(jsonl);
  std::stringstream cs, js;
  cs << c.rdbuf();
  js << j.rdbuf();
  EXPECT_EQ(cs.str(),
            "t_s,gpu,energy_j,energy_counter_mj,power_w,sm_clock_mhz,mem_clock_mhz,temperature_c,clock_event_reasons\n"
            "2.0000,0,42.500,123456,301.25,1980,3201,45,4\n"
            "2.0000,1,0.000,,80,,,,\n");
  EXPECT_EQ(js.str(),
            "{\"t_s\":2.0000,\"gpu\":0,\"energy_j\":42.500,\"energy_counter_mj\":123456,\"power_w\":301.25,"
            "\"sm_clock_mhz\":1980,\"mem_clock_mhz\":3201,\"temperature_c\":45,\"clock_event_reasons\":4}\n"
            "{\"t_s\":2.0000,\"gpu\":1,\"energy_j\":0.000,\"energy_counter_mj\":null,\"power_w\":80,"
            "\"sm_clock_mhz\":null,\"mem_clock_mhz\":null,\"temperature_c\":null,\"clock_event_reasons\":null}\n");
  EXPECT_THROW(SampleLog("/nonexistent/dir/x.csv", SampleLog::Format::kCsv, 0), std::runtime_error);
}

TEST(PrometheusServer, ServesMetricsOnLoopback) {
  PrometheusServer server("127.0.0.1:0", [] { return std::string("DCGM_FI_DEV_POWER_USAGE{gpu=\"0\"} 1\n"); });
  ASSERT_GT(server.port(), 0);
  httplib::Client client("127.0.0.1", server.port());
  auto res = client.Get("/metrics");
  ASSERT_TRUE(res);
  EXPECT_EQ(res->status, 200);
  EXPECT_EQ(res->body, "DCGM_FI_DEV_POWER_USAGE{gpu=\"0\"} 1\n");
  EXPECT_EQ(res->get_header_value("Content-Type"), "text/plain; version=0.0.4; charset=utf-8");
  EXPECT_THROW(PrometheusServer("nonsense", [] { return std::string(); }), std::invalid_argument);
  EXPECT_THROW(PrometheusServer("127.0.0.1:99999", [] { return std::string(); }), std::invalid_argument);
}

}  // namespace
}  // namespace gearshift::monitor
