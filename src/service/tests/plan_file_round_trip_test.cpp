// plan.json as `gearshift plan -o` writes it for a shipped trace, through nlohmann-json's mapping
// (plan/plan_file.cpp): written, read back and written again gives the same bytes. The trace is Megatron-style MoE
// (data/step_traces/moe_excerpt_3steps.trace.jsonl.gz): its plan has every section, variants, launch offsets.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>

#include "plan/plan_file.hpp"
#include "service/plan_job.hpp"

namespace gearshift::service {
namespace {

namespace fs = std::filesystem;

std::string file_bytes(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

TEST(PlanFileRoundTrip, AShippedTracesPlanIsWrittenReadAndWrittenAgainByteForByte) {
  PlanJobOptions o;
  o.trace_path = std::string(GEARSHIFT_DATA_DIR) + "/step_traces/moe_excerpt_3steps.trace.jsonl.gz";
  o.display_name = "moe_excerpt_3steps.trace.jsonl.gz";
  const plan::PlanFile made = plan_file(o, run_plan_job(o));
  const fs::path dir = fs::temp_directory_path() / ("gearshift_plan_round_trip_" + std::to_string(::getpid()));
  fs::create_directories(dir);
  plan::write_plan_file(made, (dir / "written.json").string());
  const plan::PlanFile read = plan::read_plan_file((dir / "written.json").string());
  plan::write_plan_file(read, (dir / "rewritten.json").string());
  const std::string written = file_bytes(dir / "written.json"), rewritten = file_bytes(dir / "rewritten.json");
  fs::remove_all(dir);
  EXPECT_EQ(written, rewritten);
  EXPECT_GT(written.size(), 1'000'000u);  // 5385 positions

  // What the round trip carried: the parts a plain mapping would not (see plan_file.cpp's top comment).
  ASSERT_EQ(read.positions.size(), made.positions.size());
  ASSERT_FALSE(read.variants.empty());
  EXPECT_EQ(read.variants.size(), made.variants.size());
  EXPECT_EQ(read.variants[0].ops, made.variants[0].ops);
  EXPECT_EQ(read.variants[0].skip, made.variants[0].skip);
  std::size_t with_launch_offset = 0;
  for (std::size_t i = 0; i < read.positions.size(); ++i) {
    EXPECT_EQ(read.positions[i].launch_offset_us, made.positions[i].launch_offset_us) << i;
    with_launch_offset += read.positions[i].launch_offset_us.has_value();
  }
  EXPECT_GT(with_launch_offset, 0u);
  EXPECT_EQ(read.positions[0].kind, trace::OpKind::memcpy);
  EXPECT_EQ(read.positions[0].cls, "copy/memset");
  EXPECT_EQ(read.positions.back().clocks, made.positions.back().clocks);
  EXPECT_EQ(read.gpu_selection->trace_gpu, "NVIDIA H200");
  EXPECT_EQ(read.predicted->saving_pct, made.predicted->saving_pct);
  EXPECT_EQ(read.predicted->range_samples, made.predicted->range_samples);
  EXPECT_EQ(read.model->calibrated_to_power_w, made.model->calibrated_to_power_w);
  EXPECT_EQ(read.provenance->step_evidence, made.provenance->step_evidence);
  EXPECT_EQ(read.provenance->trace_meta, made.provenance->trace_meta);
}

}  // namespace
}  // namespace gearshift::service
