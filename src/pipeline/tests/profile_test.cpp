#include <gtest/gtest.h>

#include "pipeline/cost_model.hpp"
#include "pipeline/error.hpp"
#include "pipeline/profile.hpp"

using namespace gearshift::pipeline;

namespace {
const char* kPerseus =
    "stage,instruction,frequency,time,energy\n"
    "0,forward,1400,0.010,5.0\n"
    "0,backward,1400,0.020,10.0\n"
    "0,forward,1200,0.012,4.0\n"
    "0,backward,1200,0.024,8.0\n";

std::string error_of(const std::string& text, int stages = 1) {
  try {
    validate_profile(parse_profile(text, "p.csv"), stages);
  } catch (const PipelineError& e) {
    return e.what();
  }
  return "";
}
}  // namespace

TEST(Profile, ParsesPerseusDialect) {
  auto p = parse_profile(kPerseus, "p.csv");
  ASSERT_EQ(p.rows.size(), 4u);
  EXPECT_EQ(p.rows[2].sm_clock_mhz, 1200);
  EXPECT_EQ(p.rows[2].instruction, Instruction::kForward);
  EXPECT_DOUBLE_EQ(p.rows[3].time_s, 0.024);
  EXPECT_EQ(p.rows[3].line, 5);
  EXPECT_EQ(p.num_stages(), 1);
}

TEST(Profile, ParsesGearshiftDialectWithCommentsAndColumnOrder) {
  auto p = parse_profile(
      "# gearshift pipeline profile v1\n"
      "stage,instruction,energy_j,time_s,sm_clock_mhz,samples\n"
      "1,recompute,3.5,0.007,1500,20\n",
      "g.csv");
  ASSERT_EQ(p.rows.size(), 1u);
  EXPECT_EQ(p.rows[0].stage, 1);
  EXPECT_EQ(p.rows[0].instruction, Instruction::kRecompute);
  EXPECT_EQ(p.rows[0].sm_clock_mhz, 1500);
  EXPECT_DOUBLE_EQ(p.rows[0].time_s, 0.007);
  EXPECT_DOUBLE_EQ(p.rows[0].energy_j, 3.5);
}

// bad_inputs p10/p10c: a UTF-8 BOM before the header was read as part of "stage" ("unknown header"), exit 3.
TEST(Profile, ReadsAUtf8ByteOrderMarkAndCrlf) {
  const std::string bom = "\xEF\xBB\xBF";
  auto p = parse_profile(bom + kPerseus, "p.csv");
  ASSERT_EQ(p.rows.size(), 4u);
  EXPECT_EQ(p.rows[0].line, 2);
  std::string crlf;
  for (const char* c = kPerseus; *c; ++c) crlf += *c == '\n' ? std::string("\r\n") : std::string(1, *c);
  auto q = parse_profile(bom + crlf, "p.csv");
  ASSERT_EQ(q.rows.size(), 4u);
  EXPECT_DOUBLE_EQ(q.rows[3].energy_j, 8.0);
  // Only at the start: a BOM inside the file is still a bad cell.
  EXPECT_NE(error_of(std::string(kPerseus) + bom + "0,forward,1000,0.015,3.0\n").find("row 6"), std::string::npos);
}

TEST(Profile, BadValuesNameTheRow) {
  std::string head = "stage,instruction,frequency,time,energy\n";
  EXPECT_EQ(error_of(head + "0,forward,1400,0.01,nan\n"), "p.csv: row 2: energy is NaN");
  EXPECT_EQ(error_of(head + "0,forward,1400,-0.01,1\n"), "p.csv: row 2: time is negative (-0.01)");
  EXPECT_EQ(error_of(head + "0,forward,1400,0,1\n"), "p.csv: row 2: time must be > 0");
  // Held the wrong value: planned, a 0 J row made the minimum energy 0.00 J, 0 MHz went into the schedules.
  EXPECT_EQ(error_of(head + "0,forward,855,0.01,0\n"), "p.csv: row 2: energy must be > 0");
  EXPECT_EQ(error_of(head + "0,forward,0,0.01,1\n"), "p.csv: row 2: frequency must be > 0 MHz");
  EXPECT_EQ(error_of(head + "0,sideways,1400,0.01,1\n"),
            "p.csv: row 2: unknown instruction 'sideways' (forward, backward, recompute)");
  EXPECT_EQ(error_of(head + "0,forward,1400,0.01\n"), "p.csv: row 2: 4 columns, header has 5");
  EXPECT_EQ(error_of(head + "0,forward,1400,0.01,x1\n"), "p.csv: row 2: energy 'x1' is not a number");
  EXPECT_EQ(error_of(head + "0,forward,1400,0.01,1\n0,forward,1400,0.02,1\n"),
            "p.csv: row 3: duplicate row for stage 0 forward 1400 MHz");
  EXPECT_NE(error_of("a,b,c\n0,1,2\n").find("unknown header"), std::string::npos);
}

TEST(Profile, MissingRowsAreNamed) {
  std::string text = std::string(kPerseus) + "1,forward,1400,0.01,5\n1,backward,1400,0.02,10\n1,forward,1200,0.012,4\n";
  EXPECT_EQ(error_of(text, 2), "p.csv: missing row: stage 1 backward at 1200 MHz (other groups have it)");
  EXPECT_EQ(error_of(kPerseus, 2), "p.csv: no rows for stage 1 forward");
  EXPECT_EQ(error_of(text, 1), "p.csv: row 6: stage 1 but the pipeline has 1 stages (0..0)");
  EXPECT_EQ(error_of(kPerseus, 1), "");
}

TEST(CostModel, DropsAndCountsDominatedAndSameQuantum) {
  // 1300 MHz is slower and costlier than 1400 MHz: dominated. 1250 and 1200 share q = 12 at u = 1 ms.
  std::vector<ProfileRow> rows = {{0, Instruction::kForward, 1400, 0.0100, 5.0, 1},
                                  {0, Instruction::kForward, 1300, 0.0110, 5.5, 2},
                                  {0, Instruction::kForward, 1250, 0.0121, 4.2, 3},
                                  {0, Instruction::kForward, 1200, 0.0125, 4.0, 4},
                                  {0, Instruction::kForward, 1000, 0.0150, 3.9, 5}};
  OperationModel m(rows, {1e-3, 10.0, CostModelKind::kHull}, "s0 fwd");
  EXPECT_EQ(m.dropped_dominated(), 1);
  EXPECT_EQ(m.dropped_same_q(), 1);
  ASSERT_EQ(m.kept().size(), 3u);
  EXPECT_EQ(m.kept()[1].sm_clock_mhz, 1250);  // the larger raw energy wins on a tie in q
  EXPECT_EQ(m.q_min(), 10);
  EXPECT_EQ(m.q_max(), 15);
  // e_eff = energy − P·q·u: 5 − 0.1 = 4.9, 4.2 − 0.12 = 4.08, 3.9 − 0.15 = 3.75.
  EXPECT_DOUBLE_EQ(m.cost(10), 4.9);
  EXPECT_NEAR(m.cost(12), 4.08, 1e-12);
  EXPECT_NEAR(m.cost(15), 3.75, 1e-12);
  EXPECT_NEAR(m.cost(11), (4.9 + 4.08) / 2, 1e-12);
  auto r = m.realise(11);
  EXPECT_EQ(r.fast_clock_mhz, 1400);
  EXPECT_EQ(r.slow_clock_mhz, 1250);
  EXPECT_DOUBLE_EQ(r.fast_fraction, 0.5);
  EXPECT_EQ(r.rounded_clock_mhz, 1400);
  EXPECT_NEAR(r.rounded_extra_j, 4.9 - 4.49, 1e-12);
}

TEST(CostModel, TimeBelowOneUnitIsAnError) {
  std::vector<ProfileRow> rows = {{0, Instruction::kForward, 1400, 0.0004, 5.0, 1}};
  EXPECT_THROW(OperationModel(rows, {1e-3, 0, CostModelKind::kHull}, "x"), PipelineError);
}
