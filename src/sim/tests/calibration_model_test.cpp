// The model file `gearshift calibrate` writes (sim/calibration_model.hpp): a kernel's roofline law travels in it
// ("law": "roofline"), a file without the field reads as before (additive), bad values are refused by name, and
// apply_model hands the law to the workload at the position's own reference clocks.
#include "sim/calibration_model.hpp"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>

namespace gearshift::sim {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;

class ModelFile : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("gearshift_model_file_" + std::to_string(::getpid()));
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  std::string path(const std::string& name) const { return (dir_ / name).string(); }
  // A file of version 1 with one kernel whose entry is `kernel` (JSON members after the name).
  std::string write(const std::string& name, const std::string& kernel) const {
    std::ofstream(path(name)) << R"({"format": "gearshift-model", "version": 1, "gpu": "h200",
      "ref": {"sm_mhz": 1980, "mem_mhz": 3201},
      "board": {"activity_scale": 0.8, "memory_w_at_max": 130, "power_rms_relative_error": 0.001},
      "kernels": [{"name": "k", )" + kernel + R"(, "rms_relative_error": 0, "pairs": 4}]})";
    return path(name);
  }
  std::string refusal(const std::string& kernel) const {
    try {
      load_model_file(write("bad.json", kernel));
    } catch (const std::runtime_error& e) {
      return e.what();
    }
    return "no error";
  }
  fs::path dir_;
};

CalibratedModel two_kernels() {
  CalibratedModel m;
  m.gpu = "h200";
  m.ref = {1980, 3201};
  m.activity_scale = 0.8;
  m.memory_w_at_max = 130;
  m.kernels.push_back({"gemm", 0.8, 0.1, 0.001, 4});
  m.kernels.push_back({"vectorized_elementwise_kernel<add>", 0.90, 0.95, 0.0, 4, model::TimeLaw::roofline});
  return m;
}

TEST_F(ModelFile, RooflineLawRoundTripsAndAnOldFileReadsAdditive) {
  write_model_file(two_kernels(), path("m.json"));
  std::ifstream in(path("m.json"));
  const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  // Written only where it is the roofline: an additive kernel's entry is as before.
  EXPECT_EQ(text.find("\"law\""), text.rfind("\"law\""));
  EXPECT_THAT(text, HasSubstr("\"law\": \"roofline\""));
  const CalibratedModel back = load_model_file(path("m.json"));
  ASSERT_EQ(back.kernels.size(), 2u);
  EXPECT_EQ(back.kernels[0].law, model::TimeLaw::additive);
  EXPECT_EQ(back.kernels[1].law, model::TimeLaw::roofline);
  EXPECT_DOUBLE_EQ(back.kernels[1].sm_share, 0.90);
  EXPECT_DOUBLE_EQ(back.kernels[1].mem_share, 0.95);
  // A file from before the field: additive.
  EXPECT_EQ(load_model_file(write("old.json", R"("sm_share": 0.5, "mem_share": 0.3)")).kernels.at(0).law,
            model::TimeLaw::additive);
  EXPECT_EQ(load_model_file(write("add.json", R"("sm_share": 0.5, "mem_share": 0.3, "law": "additive")")).kernels.at(0).law,
            model::TimeLaw::additive);
}

TEST_F(ModelFile, BadLawsAndSharesAreRefusedByName) {
  EXPECT_THAT(refusal(R"("sm_share": 0.5, "mem_share": 0.3, "law": "kinked")"),
              HasSubstr("kernels[0].law must be \"additive\" or \"roofline\" (absent: additive), got \"kinked\""));
  EXPECT_THAT(refusal(R"("sm_share": 0.5, "mem_share": 0.3, "law": 2)"), HasSubstr("kernels[0].law must be"));
  // The roofline's terms overlap: 0.90 + 0.95 is its law, but no additive one.
  EXPECT_THAT(refusal(R"("sm_share": 0.90, "mem_share": 0.95)"), HasSubstr("with a sum <= 1"));
  EXPECT_THAT(refusal(R"("sm_share": 0.90, "mem_share": 0, "law": "roofline")"),
              HasSubstr("kernels[0]: a roofline kernel's sm_share and mem_share must each be > 0 and <= 1"));
  EXPECT_THAT(refusal(R"("sm_share": 1.2, "mem_share": 0.95, "law": "roofline")"), HasSubstr("must each be > 0"));
}

// The op ran at 1890/3201 (below the file's 1980/3201 reference): its a, b are re-expressed there, and its time
// at any pair relative to 1980/3201 is the file's law.
TEST_F(ModelFile, ApplyModelGivesTheRooflineLawAtThePositionsOwnReference) {
  const CalibratedModel m = two_kernels();
  model::DvfsModel dm(gpu::find_spec("h200"));
  model::Workload w;
  model::WorkloadOp op;
  op.name = "vectorized_elementwise_kernel<add>";
  op.coeffs = model::class_prior(model::KernelClass::elementwise);
  op.coeffs.activity = 0.1;  // never capped
  op.ref = {1890, 3201};
  op.ref_sampled = true;
  op.ref_time_ns = 1e6;
  w.ops.push_back(op);
  EXPECT_EQ(apply_model(m, w, dm).ops_matched, 1u);
  const model::WorkloadOp& o = w.ops[0];
  EXPECT_EQ(o.coeffs.time_law, model::TimeLaw::roofline);
  // The file's law relative to its reference: t(f, m)/t(1980, 3201) = max(0.9·1980/f, 0.95·3201/m) + 0.05.
  auto law = [](double f, double mem) { return std::max(0.90 * 1980 / f, 0.95 * 3201 / mem) + 0.05; };
  const double at_ref = law(1890, 3201);  // 1.0: above the 1876 MHz kink, memory-bound
  for (model::ClockPair c : {model::ClockPair{1980, 3201}, model::ClockPair{990, 3201}, model::ClockPair{1500, 2201}})
    EXPECT_NEAR(dm.predict(o.ref_time_ns, o.ref, c, o.coeffs).time_ns, 1e6 * law(c.sm_mhz, c.mem_mhz) / at_ref, 1e-3)
        << c.sm_mhz << "/" << c.mem_mhz;
}

}  // namespace
}  // namespace gearshift::sim
