// A trace's meta is what calibration fits the model to: one that cannot be a measurement is refused.
#include <gtest/gtest.h>

#include <string>

#include "trace/error.hpp"
#include "trace/measured_check.hpp"

namespace gearshift::trace {
namespace {

std::string refusal(const Trace& t) {
  try {
    check_measured(t, "t.json");
  } catch (const TraceError& e) {
    return e.what();
  }
  return {};
}

Trace gpt2_meta() {  // the figures of ../shared/data/traces/gpt2_h200_trace.json.gz
  Trace t;
  t.measured.step_time_s = 0.0849;
  t.measured.energy_per_step_j = 51.69;
  t.measured.average_power_w = 608.8;
  t.meta_json = R"({"s_per_iter": 0.0849, "J_per_iter": 51.69, "avg_W": 608.8})";
  return t;
}

TEST(MeasuredCheck, AMeasuredStepPasses) {
  EXPECT_EQ(refusal(gpt2_meta()), "");
  EXPECT_EQ(refusal(Trace{}), "");  // no meta: nothing to check
}

TEST(MeasuredCheck, NonPositiveFiguresAreRefused) {
  // Held the wrong value: "Measured -0.0849 s, -51.69 J per step" was printed and the plan made.
  Trace t = gpt2_meta();
  t.measured.step_time_s = -0.0849;
  EXPECT_EQ(refusal(t), "t.json: meta s/step is -0.0849 s: a measured figure must be positive and finite");
  t = gpt2_meta();
  t.measured.energy_per_step_j = 0.0;
  EXPECT_EQ(refusal(t), "t.json: meta J/step is 0 J: a measured figure must be positive and finite");
}

TEST(MeasuredCheck, EnergyOverTimeThatContradictsTheAveragePowerIsRefused) {
  // A whole run's energy given per step (20x): calibrated to avg_W, it planned with a warning only.
  Trace t = gpt2_meta();
  t.measured.energy_per_step_j = 1034.0;
  EXPECT_NE(refusal(t).find("J/step over s/step is 1034 J / 0.0849 s = 12179 W, but avg_W is 609 W"),
            std::string::npos)
      << refusal(t);
  t.measured.energy_per_step_j = 51.69 * 1.09;  // within 10 %: another averaging window of the same run
  EXPECT_EQ(refusal(t), "");
}

TEST(MeasuredCheck, ANumberWrittenAsTextIsRefused) {
  // Held the wrong value: ignored, so the plan was uncalibrated without a word.
  Trace t;
  t.meta_json = R"({"s_per_iter": "0.0849", "model": "gpt2"})";
  EXPECT_EQ(refusal(t), "t.json: meta field 's_per_iter' is string (\"0.0849\"), not a number: a measured figure "
                        "must be a JSON number");
}

}  // namespace
}  // namespace gearshift::trace
