#include "model/sweep_csv.hpp"

#include <gtest/gtest.h>

#include <stdexcept>
#include <string>

#include "model/model_check.hpp"

namespace gearshift::model {
namespace {

std::string error_of(const std::string& text) {
  try {
    parse_sweep_csv(text, "s.csv");
  } catch (const std::invalid_argument& e) {
    return e.what();
  }
  return "";
}

TEST(SweepCsv, UnitsAppliedClocksHeaderFieldsAndOrder) {
  const SweepFile f = parse_sweep_csv(
      "# a comment\n# board: v100\n# power_limit_w: 250\n"
      "kernel,sm_clock_mhz,applied_sm_clock_mhz,mem_clock_mhz,time_ms,power_w,energy_j\n"
      "b,1400,1395.4,877,2.0,100,\n"   // applied clock rounded; energy from power × time
      "a,1200,,877,3.0,80,0.5\n"       // no applied clock: the requested one; energy_j preferred to power_w
      "b,1000,1001,877,2.5,60,\n",
      "s.csv");
  EXPECT_EQ(f.board, "v100");
  EXPECT_EQ(f.power_limit_w, 250);
  ASSERT_EQ(f.kernels.size(), 2u);
  EXPECT_EQ(f.first_line, (std::vector<int>{5, 6}));
  const KernelSweep& b = f.kernels[0];
  EXPECT_EQ(b.kernel, "b");
  EXPECT_EQ(b.gpu, "v100");
  EXPECT_EQ(b.dataset, "csv");
  EXPECT_EQ(b.source, "s.csv");
  ASSERT_EQ(b.samples.size(), 2u);
  EXPECT_EQ(b.samples[0].sm_mhz, 1001);  // ascending
  EXPECT_EQ(b.samples[1].sm_mhz, 1395);
  EXPECT_EQ(b.samples[1].mem_mhz, 877);
  EXPECT_DOUBLE_EQ(b.samples[1].time_s, 2.0e-3);
  EXPECT_DOUBLE_EQ(b.samples[1].energy_j, 0.2);
  EXPECT_DOUBLE_EQ(f.kernels[1].samples[0].energy_j, 0.5);
  EXPECT_TRUE(b.counters.empty());
  EXPECT_TRUE(f.notes.empty());
}

TEST(SweepCsv, BoardColumnTimeUnitsAndNoMemoryClock) {
  const SweepFile f = parse_sweep_csv("board,kernel,sm_clock_mhz,time_us,energy_j\nh100,k,1980,5,0.01\n", "s.csv");
  EXPECT_EQ(f.board, "h100");
  EXPECT_DOUBLE_EQ(f.kernels[0].samples[0].time_s, 5e-6);
  EXPECT_EQ(f.kernels[0].samples[0].mem_mhz, 0);  // left for the caller (the board's default memory clock)
  EXPECT_EQ(parse_sweep_csv("kernel,sm_clock_mhz,time_s,energy_j\nk,1000,1,1\n", "s.csv", 1593).kernels[0].samples[0].mem_mhz,
            1593);
}

TEST(SweepCsv, CountersAndAnEmptyCounterColumn) {
  const SweepFile f = parse_sweep_csv(
      "kernel,sm_clock_mhz,time_s,energy_j,dram_active,fp32_active,tensor_active\n"
      "k,1000,1,100,0.5,0.25,\n"
      "k,1100,0.9,95,,,\n",
      "s.csv");
  ASSERT_EQ(f.notes.size(), 1u);
  EXPECT_EQ(f.notes[0], "s.csv: counter column(s) tensor_active empty on every row: ignored");
  const auto& c = f.kernels[0].counters;
  ASSERT_EQ(c.size(), 2u);
  EXPECT_TRUE(c[0].measured);
  EXPECT_DOUBLE_EQ(c[0].dram_active, 0.5);
  EXPECT_DOUBLE_EQ(c[0].fp32_active, 0.25);
  EXPECT_FALSE(c[1].measured);  // this row gave none of the counters
  EXPECT_NE(error_of("kernel,sm_clock_mhz,time_s,energy_j,sm_active\nk,1000,1,100,1.5\n")
                .find("s.csv:2: column 'sm_active' is an activity ratio in [0, 1], got '1.5'"),
            std::string::npos);
}

TEST(SweepCsv, ErrorsNameTheFileLineAndColumn) {
  EXPECT_EQ(error_of(""), "s.csv: empty file (no header line; docs/sweep-format.md)");
  EXPECT_EQ(error_of("kernel,sm_clock_mhz,time_s,energy_j\n"), "s.csv: no data rows after the header (line 1)");
  EXPECT_NE(error_of("kernel,time_s,energy_j\nk,1,1\n").find("s.csv:1: missing column 'sm_clock_mhz'"), std::string::npos);
  EXPECT_NE(error_of("kernel,sm_clock_mhz,time_s,time_ms,energy_j\n").find("s.csv:1: two time columns ('time_s' and 'time_ms')"),
            std::string::npos);
  EXPECT_EQ(error_of("kernel,sm_clock_mhz,time_s,energy_j\nk,1000,1,-2\n"), "s.csv:2: column 'energy_j' must be > 0, got '-2'");
  EXPECT_EQ(error_of("kernel,sm_clock_mhz,time_s,energy_j\nk,1000,1,nan\n"),
            "s.csv:2: column 'energy_j' is not a number: 'nan'");
  EXPECT_EQ(error_of("board,kernel,sm_clock_mhz,time_s,energy_j\na,k,1000,1,1\nb,k,1100,1,1\n"),
            "s.csv:3: board 'b' differs from 'a' named before; one board per file");
  EXPECT_EQ(error_of("kernel,sm_clock_mhz,applied_sm_clock_mhz,time_s,energy_j\nk,1000,990,1,1\nk,1005,990,1,1\n"),
            "s.csv:3: kernel 'k' already has a sample at SM 990 MHz, memory 0 MHz (line 2)");
}

TEST(ClockChoice, ModelAgainstOracleMeasuredAtThePickedClocks) {
  // MEASURED: 1400 MHz top (1.00 s, 100 J); 1200 (1.015 s, 90 J); 1000 (1.06 s, 85 J).
  // MODELLED: the model thinks 1000 MHz costs only 1 % more time.
  const std::vector<HeldOut> every = {{1000, 1.06, 85, 1.01, 84, 0, 0}, {1200, 1.015, 90, 1.005, 91, 0, 0},
                                      {1400, 1.00, 100, 1.00, 100, 0, 0}};
  const ClockChoice c2 = choose_clock(every, 0.02);
  EXPECT_EQ(c2.top_mhz, 1400);
  EXPECT_EQ(c2.oracle_mhz, 1200);
  EXPECT_EQ(c2.model_mhz, 1000);
  EXPECT_NEAR(c2.oracle_saving, 0.10, 1e-12);
  EXPECT_NEAR(c2.model_saving, 0.15, 1e-12);
  EXPECT_NEAR(c2.model_slowdown, 0.06, 1e-12);
  EXPECT_TRUE(c2.over_bound);
  const ClockChoice c0 = choose_clock(every, 0.0);
  EXPECT_EQ(c0.oracle_mhz, 1400);
  EXPECT_EQ(c0.model_mhz, 1400);
  EXPECT_FALSE(c0.over_bound);
}

}  // namespace
}  // namespace gearshift::model
