// plan.json (plan/plan_file.hpp): what is written is read back unchanged, and every invalid file is refused with a
// message naming the file and the field.
#include "plan/plan_file.hpp"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include <fmt/format.h>

namespace gearshift::plan {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

PlanFile small_plan() {
  PlanFile p;
  p.gpu = "h200";
  p.gpu_selection = PlanFileGpuSelection{"h200", "trace", "NVIDIA H200", "h200"};
  p.strategy = "phase";
  p.switch_latency_us = 6000;
  p.max_slowdown = 0.005;
  p.period_us = 100;
  p.positions = {{"gemm", trace::OpKind::kernel, 7, "gemm", "forward", 40, 0, {1980, 3201}},
                 {"Memset (Device)", trace::OpKind::memset, 7, "copy/memset", "forward", 1, 41, {1500, 3201}},
                 {"softmax", trace::OpKind::kernel, 7, "elementwise", "backward", 30, 50, {1500, 3201}}};
  p.phases = p.phases_from_positions();
  PlanFilePredicted f;
  f.time_s = 1e-4;
  f.energy_j = 0.05;
  f.saving_pct = 3;
  f.slowdown_pct = 0.4;
  f.baseline_time_s = 0.99e-4;
  f.baseline_energy_j = 0.052;
  f.clock_changes_per_step = 2;
  p.predicted = f;
  p.model = model_section(model::power_params_for(gpu::find_spec("h200")), 600.0);
  PlanFileProvenance v;
  v.input = "t.json.gz";
  v.format = "chrome-trace";
  v.trace_meta = {{"model", "gpt2"}};
  v.iterations = 3;
  v.iteration_method = "step markers";
  v.step_confidence = 1;
  v.device = 0;
  v.warnings = {"a warning"};
  v.step_evidence = {"3 step markers"};
  v.created = "2026-01-01T00:00:00Z";
  v.gearshift_version = "0.1.0";
  p.provenance = v;
  return p;
}

struct TmpDir {
  fs::path dir = fs::temp_directory_path() / ("gearshift_plan_file_test_" + std::to_string(::getpid()));
  TmpDir() { fs::create_directories(dir); }
  ~TmpDir() { fs::remove_all(dir); }
  std::string write(const std::string& name, const std::string& text) const {
    std::ofstream(dir / name, std::ios::binary) << text;
    return (dir / name).string();
  }
};

// The message of the PlanFileError that reading `j` throws; "" when it is read.
std::string error_of(const json& j) {
  try {
    plan_file_from_json(j, "p.json");
  } catch (const PlanFileError& e) {
    return e.what();
  }
  return "";
}

TEST(PlanFile, WrittenIsReadBackUnchanged) {
  TmpDir t;
  const std::string path = (t.dir / "plan.json").string();
  const PlanFile p = small_plan();
  write_plan_file(p, path);
  EXPECT_FALSE(fs::exists(path + ".tmp-" + std::to_string(::getpid())));
  const PlanFile q = read_plan_file(path);
  EXPECT_EQ(to_json(q), to_json(p));
  ASSERT_EQ(q.positions.size(), 3u);
  EXPECT_EQ(q.positions[1].kind, trace::OpKind::memset);
  EXPECT_EQ(q.positions[2].clocks, (model::ClockPair{1500, 3201}));
  ASSERT_EQ(q.phases.size(), 2u);
  EXPECT_EQ(q.phases[1].first_position, 1u);
  EXPECT_EQ(q.phases[1].last_position, 2u);
  EXPECT_EQ(q.phases[1].first_op, "Memset (Device)");
}

TEST(PlanFile, KeepsEveryKeyOfTodaysPlanJson) {
  const json j = to_json(small_plan());
  for (const char* k : {"format", "version", "gpu", "gpu_selection", "strategy", "switch_latency_us", "max_slowdown",
                        "predicted", "phases", "positions", "period_us", "model", "provenance"})
    EXPECT_TRUE(j.contains(k)) << k;
  for (const char* k : {"name", "kind", "stream", "class", "pass", "duration_us", "start_offset_us", "sm_clock_mhz",
                        "mem_clock_mhz"})
    EXPECT_TRUE(j["positions"][0].contains(k)) << k;
  for (const char* k : {"first_position", "last_position", "first_op", "sm_clock_mhz", "mem_clock_mhz"})
    EXPECT_TRUE(j["phases"][0].contains(k)) << k;
  for (const char* k : {"modelled", "low_confidence", "time_s", "energy_j", "saving_pct", "slowdown_pct",
                        "baseline_time_s", "baseline_energy_j", "clock_changes_per_step"})
    EXPECT_TRUE(j["predicted"].contains(k)) << k;
  for (const char* k : {"formula", "idle_w_at_min_clock", "idle_w_at_max_clock", "knee_mhz", "v_min_ratio",
                        "dynamic_w_at_max", "memory_w_at_max", "power_cap_w", "activity_scale", "calibrated_to_power_w",
                        "coefficients"})
    EXPECT_TRUE(j["model"].contains(k)) << k;
  for (const char* k : {"input", "format", "trace_meta", "iterations", "iteration_method", "step_confidence", "device",
                        "warnings", "step_evidence", "created", "gearshift_version"})
    EXPECT_TRUE(j["provenance"].contains(k)) << k;
  EXPECT_EQ(j["format"], "gearshift-plan");
  EXPECT_EQ(j["version"], 1);
  EXPECT_EQ(j["predicted"]["modelled"], true);
}

TEST(PlanFile, ErrorBarsAreAdditiveFields) {
  PlanFile p = small_plan();
  p.predicted->saving_low_pct = 1.5;
  p.predicted->saving_high_pct = 4.0;
  p.predicted->time_low_s = 0.99e-4;
  p.predicted->time_high_s = 1.02e-4;
  p.predicted->p_over_budget = 0.25;
  p.predicted->range_samples = 200;
  const json j = to_json(p);
  for (const char* k : {"saving_low_pct", "saving_high_pct", "time_low_s", "time_high_s", "p_over_budget", "range_samples"})
    EXPECT_TRUE(j["predicted"].contains(k)) << k;
  EXPECT_EQ(to_json(plan_file_from_json(j, "p.json")), j);  // read back unchanged
  // A plan written before the fields has none of them, and reads as before.
  EXPECT_FALSE(to_json(small_plan())["predicted"].contains("saving_low_pct"));
  EXPECT_FALSE(plan_file_from_json(to_json(small_plan()), "p.json").predicted->p_over_budget.has_value());
  json bad = j;
  bad["predicted"]["p_over_budget"] = 1.5;
  EXPECT_EQ(error_of(bad), "p.json: predicted: 'p_over_budget' must lie in [0, 1]");
  bad = j;
  bad["predicted"]["range_samples"] = 0;
  EXPECT_EQ(error_of(bad), "p.json: predicted: 'range_samples' must be > 0");
  bad = j;
  bad["predicted"]["saving_low_pct"] = "low";
  EXPECT_NE(error_of(bad).find("'saving_low_pct'"), std::string::npos) << error_of(bad);
}

TEST(PlanFile, VariantsAndLaunchOffsetsAreAdditiveFields) {
  PlanFile p = small_plan();
  p.positions[0].launch_offset_us = 3.5;
  p.variants = {{0, {{"clip", trace::OpKind::kernel}, {"Memcpy DtoD (Device -> Device)", trace::OpKind::memcpy}}, 0, 4},
                {0, {}, 2, 3}};
  const json j = to_json(p);
  EXPECT_EQ(j["positions"][0]["launch_offset_us"], 3.5);
  EXPECT_FALSE(j["positions"][1].contains("launch_offset_us"));
  ASSERT_EQ(j["variants"].size(), 2u);
  EXPECT_EQ(j["variants"][0]["ops"][1]["kind"], "memcpy");
  EXPECT_FALSE(j["variants"][0].contains("skip"));
  EXPECT_EQ(j["variants"][1]["skip"], 2);
  EXPECT_EQ(to_json(plan_file_from_json(j, "p.json")), j);  // read back unchanged
  EXPECT_FALSE(to_json(small_plan()).contains("variants"));  // none: not written, and read as none
  EXPECT_TRUE(plan_file_from_json(to_json(small_plan()), "p.json").variants.empty());
  json bad = j;
  bad["variants"][0]["after"] = 3;
  EXPECT_EQ(error_of(bad), "p.json: variants[0]: 'after' is 3, out of range: the plan has 3 positions (-1 to 2)");
  bad = j;
  bad["variants"][1]["skip"] = 3;
  EXPECT_EQ(error_of(bad), "p.json: variants[1]: 'skip' 3 after position 0 runs past the plan's 3 positions");
  json alternative = j;  // ops in place of positions (session 18): read back unchanged
  alternative["variants"][0]["skip"] = 1;
  EXPECT_EQ(to_json(plan_file_from_json(alternative, "p.json")), alternative);
  bad = j;
  bad["variants"][1].erase("skip");
  EXPECT_EQ(error_of(bad), "p.json: variants[1]: a variant inserts ops ('ops', not empty), leaves positions out "
                           "('skip' > 0), or both; this one does neither");
  bad = j;
  bad["variants"][0]["ops"][0].erase("kind");
  EXPECT_NE(error_of(bad).find("variants[0]: ops[0]"), std::string::npos) << error_of(bad);
}

TEST(PlanFile, OptionalSectionsMayBeAbsentAndPhasesEmpty) {
  json j = to_json(small_plan());
  for (const char* k : {"gpu_selection", "strategy", "max_slowdown", "predicted", "model", "provenance"}) j.erase(k);
  j["phases"] = json::array();  // bad_inputs r10: accepted
  EXPECT_EQ(error_of(j), "");
  j.erase("phases");
  EXPECT_EQ(error_of(j), "");
}

TEST(PlanFile, RefusesWrongFormatAndNewerVersion) {
  json j = to_json(small_plan());
  j["format"] = "something-else";
  EXPECT_EQ(error_of(j), "p.json: not a gearshift plan: 'format' is \"something-else\", not \"gearshift-plan\"");
  j.erase("format");
  EXPECT_NE(error_of(j).find("not a gearshift plan: no 'format' field"), std::string::npos);
  EXPECT_EQ(error_of(json::array()), "p.json: not a gearshift plan: the JSON is array, not an object");
  j = to_json(small_plan());
  j["version"] = 2;
  EXPECT_NE(error_of(j).find("p.json: plan version 2 is newer than this gearshift reads (1)"), std::string::npos);
  j["version"] = "1";
  EXPECT_EQ(error_of(j), "p.json: 'version' is \"1\", not a number (the plan format's version)");
  j.erase("version");
  EXPECT_EQ(error_of(j), "p.json: missing field 'version'");
}

TEST(PlanFile, RefusesMissingOrEmptyPositionsAndPositionsWithoutKind) {
  json j = to_json(small_plan());
  j.erase("positions");
  EXPECT_NE(error_of(j).find("p.json: no 'positions'"), std::string::npos);
  j["positions"] = json::array();
  EXPECT_NE(error_of(j).find("p.json: 'positions' is empty"), std::string::npos);
  j = to_json(small_plan());
  j["positions"][1].erase("kind");  // what plan-ranks wrote before: the memset read as a kernel
  EXPECT_NE(error_of(j).find("p.json: positions[1]: missing field 'kind'"), std::string::npos) << error_of(j);
  j["positions"][1]["kind"] = 3;
  EXPECT_EQ(error_of(j), "p.json: positions[1]: 'kind' is 3, not a string");
  j["positions"][1]["kind"] = "Kernel";
  EXPECT_EQ(error_of(j), "p.json: positions[1]: 'kind' is \"Kernel\": kernel, memcpy or memset");
  j = to_json(small_plan());
  j["positions"][0].erase("name");
  EXPECT_EQ(error_of(j), "p.json: positions[0]: missing field 'name'");
}

TEST(PlanFile, RefusesClocksThatAreNotNumbersOrNotTheGpus) {
  json j = to_json(small_plan());
  j["positions"][2]["sm_clock_mhz"] = "fast";
  EXPECT_EQ(error_of(j), "p.json: positions[2]: 'sm_clock_mhz' is \"fast\", not a number (MHz)");
  j["positions"][2]["sm_clock_mhz"] = 1500.5;
  EXPECT_EQ(error_of(j), "p.json: positions[2]: 'sm_clock_mhz' is 1500.5, not a whole number (MHz)");
  j["positions"][2]["sm_clock_mhz"] = 5000;
  EXPECT_NE(error_of(j).find("p.json: positions[2]: SM 5000 MHz, memory 3201 MHz is not a clock pair of its GPU "
                             "'h200' (SM 345-1980 MHz, memory 2201/3201 MHz)"),
            std::string::npos)
      << error_of(j);
  j["positions"][2]["sm_clock_mhz"] = 1501;  // inside the range, not one of its 15 MHz steps
  EXPECT_NE(error_of(j).find("SM 1501 MHz, memory 3201 MHz is not a clock pair"), std::string::npos);
  j["positions"][2]["sm_clock_mhz"] = -100;
  EXPECT_NE(error_of(j).find("SM -100 MHz"), std::string::npos);
  j = to_json(small_plan());
  j["positions"][0]["mem_clock_mhz"] = 1000;
  EXPECT_NE(error_of(j).find("positions[0]: SM 1980 MHz, memory 1000 MHz is not a clock pair"), std::string::npos);
  j = to_json(small_plan());
  j["gpu"] = "v100";  // an H200 plan relabelled: its clocks are not a V100's
  EXPECT_NE(error_of(j).find("is not a clock pair of its GPU 'v100' (SM 135-1530 MHz, memory 877 MHz)"),
            std::string::npos);
  j["gpu"] = "tpu";
  EXPECT_NE(error_of(j).find("p.json: 'gpu' is \"tpu\", a GPU without a spec"), std::string::npos) << error_of(j);
}

TEST(PlanFile, RefusesNegativePeriodOrSwitchLatency) {
  json j = to_json(small_plan());
  j["period_us"] = -5;
  EXPECT_EQ(error_of(j), "p.json: 'period_us' is -5: the step time must be > 0 µs");
  j["period_us"] = 0;
  EXPECT_NE(error_of(j).find("'period_us' is 0"), std::string::npos);
  j = to_json(small_plan());
  j["switch_latency_us"] = -1;
  EXPECT_EQ(error_of(j), "p.json: 'switch_latency_us' is -1: the switch latency must be in [0, 60,000,000] µs (a minute)");
  j["switch_latency_us"] = 3e11;  // held the wrong value: accepted, and replay stepped through it for minutes
  EXPECT_EQ(error_of(j), "p.json: 'switch_latency_us' is 300000000000: the switch latency must be in [0, 60,000,000] µs (a minute)");
  j["switch_latency_us"] = nullptr;
  EXPECT_EQ(error_of(j), "p.json: 'switch_latency_us' is null, not a number (µs)");
  j = to_json(small_plan());
  j["positions"][0]["duration_us"] = -1;
  EXPECT_EQ(error_of(j), "p.json: positions[0]: 'duration_us' is -1: must be >= 0 µs");
}

TEST(PlanFile, RefusesPhasesOutOfRangeOutOfOrderOrOverlapping) {
  const json good = to_json(small_plan());  // phases 0-0, 1-2
  json j = good;
  j["phases"][1]["first_position"] = 99999;  // bad_inputs r12
  EXPECT_EQ(error_of(j), "p.json: phases[1]: 'first_position' is 99999, out of range: the plan has 3 positions (0-2)");
  j = good;
  j["phases"][1]["last_position"] = 3;
  EXPECT_NE(error_of(j).find("phases[1]: 'last_position' is 3, out of range"), std::string::npos);
  j = good;
  j["phases"][1]["first_position"] = 2;
  j["phases"][1]["last_position"] = 1;
  EXPECT_EQ(error_of(j), "p.json: phases[1]: 'first_position' 2 is after 'last_position' 1");
  j = good;
  std::swap(j["phases"][0], j["phases"][1]);
  EXPECT_NE(error_of(j).find("phases[1]: positions 0-0 come before phases[0] (1-2)"), std::string::npos) << error_of(j);
  j = good;
  j["phases"][1]["first_position"] = 0;
  EXPECT_NE(error_of(j).find("phases[1]: positions 0-2 overlap phases[0] (0-0)"), std::string::npos) << error_of(j);
  j = good;
  j["phases"][1]["first_position"] = -1;
  EXPECT_EQ(error_of(j), "p.json: phases[1]: 'first_position' is -1: position indices start at 0");
  j = good;
  j["phases"][0]["sm_clock_mhz"] = 1500;  // a phase whose clocks are not its positions'
  EXPECT_NE(error_of(j).find("phases[0]: SM 1500 MHz, memory 3201 MHz, but positions[0] inside it has SM 1980 MHz"),
            std::string::npos)
      << error_of(j);
  j = good;
  j["phases"] = json::array({json{{"first_position", 0}}});
  EXPECT_EQ(error_of(j), "p.json: phases[0]: missing field 'last_position'");
}

// The cases the reader handles by hand (plan_file.cpp's check_plan_json) before nlohmann-json's mapping reads the
// file: each as the field-by-field reader it replaced (issue 49) read it.
TEST(PlanFile, NullReadsAsAbsentForOptionalFieldsAndIsRefusedForRequiredOnes) {
  json j = to_json(small_plan());
  j["max_slowdown"] = nullptr;
  j["strategy"] = nullptr;
  j["gpu_selection"]["trace_gpu"] = nullptr;
  j["predicted"]["time_s"] = nullptr;
  j["predicted"]["low_confidence"] = nullptr;
  j["model"]["knee_mhz"] = nullptr;
  j["model"]["activity_scale"] = nullptr;
  j["provenance"]["warnings"] = nullptr;
  j["positions"][0]["stream"] = nullptr;
  j["phases"] = nullptr;
  const PlanFile p = plan_file_from_json(j, "p.json");
  EXPECT_FALSE(p.max_slowdown.has_value());
  EXPECT_EQ(p.strategy, "");
  EXPECT_EQ(p.gpu_selection->trace_gpu, "");
  EXPECT_EQ(p.gpu_selection->trace_spec, "h200");
  EXPECT_FALSE(p.predicted->time_s.has_value());
  EXPECT_DOUBLE_EQ(*p.predicted->energy_j, 0.05);
  EXPECT_FALSE(p.predicted->low_confidence);
  EXPECT_EQ(p.model->knee_mhz, 0);           // the field's default
  EXPECT_DOUBLE_EQ(p.model->activity_scale, 1);  // the field's default
  EXPECT_TRUE(p.provenance->warnings.empty());
  EXPECT_FALSE(p.positions[0].stream.has_value());
  EXPECT_EQ(p.positions[1].stream, 7);
  EXPECT_TRUE(p.phases.empty());
  for (const char* required : {"gpu", "period_us"}) {
    json bad = to_json(small_plan());
    bad[required] = nullptr;
    EXPECT_NE(error_of(bad).find(fmt::format("p.json: '{}' is null, not a ", required)), std::string::npos)
        << error_of(bad);
  }
  json bad = to_json(small_plan());
  bad["positions"] = nullptr;
  EXPECT_EQ(error_of(bad), "p.json: 'positions' is null, not a list");
  bad = to_json(small_plan());
  bad["positions"][0]["name"] = nullptr;
  EXPECT_EQ(error_of(bad), "p.json: positions[0]: 'name' is null, not a string");
}

TEST(PlanFile, WholeNumbersMayBeFloatsWithoutFraction) {
  json j = to_json(small_plan());
  j["version"] = 1.0;
  j["positions"][0]["sm_clock_mhz"] = 1980.0;
  j["positions"][0]["stream"] = 7.0;
  j["phases"][1]["first_position"] = 1.0;
  j["predicted"]["clock_changes_per_step"] = 2.0;
  const PlanFile p = plan_file_from_json(j, "p.json");
  EXPECT_EQ(to_json(p), to_json(small_plan()));  // the same plan as written with integers
  j["phases"][1]["first_position"] = 1.5;
  EXPECT_EQ(error_of(j), "p.json: phases[1]: 'first_position' is 1.5, not a whole number (a position index)");
  j = to_json(small_plan());
  j["positions"][0]["stream"] = 3e9;  // beyond a whole number's 2e9
  EXPECT_EQ(error_of(j), "p.json: positions[0]: 'stream' is 3000000000.0, not a whole number (a CUDA stream id)");
}

TEST(PlanFile, BooleansAreNotNumbersAndNumbersNotBooleans) {
  json j = to_json(small_plan());
  j["period_us"] = true;  // nlohmann-json's own mapping would read true as 1
  EXPECT_EQ(error_of(j), "p.json: 'period_us' is true, not a number (µs)");
  j = to_json(small_plan());
  j["positions"][0]["mem_clock_mhz"] = false;
  EXPECT_EQ(error_of(j), "p.json: positions[0]: 'mem_clock_mhz' is false, not a number (MHz)");
  j = to_json(small_plan());
  j["predicted"]["low_confidence"] = 1;
  EXPECT_EQ(error_of(j), "p.json: predicted: 'low_confidence' is 1, not true or false");
  j["predicted"]["low_confidence"] = true;
  j["predicted"]["modelled"] = false;
  EXPECT_EQ(error_of(j), "p.json: predicted: 'modelled' is false: a plan's predicted figures are modelled");
}

TEST(PlanFile, NegativeIterationsReadAsUnknownOtherNegativeCountsAreRefused) {
  json j = to_json(small_plan());
  j["provenance"]["iterations"] = -1;
  EXPECT_FALSE(plan_file_from_json(j, "p.json").provenance->iterations.has_value());
  j = to_json(small_plan());
  j["predicted"]["clock_changes_per_step"] = -2;
  EXPECT_EQ(error_of(j), "p.json: predicted: 'clock_changes_per_step' is negative");
  j = to_json(small_plan());
  j["variants"] = json::array({json{{"after", 0}, {"skip", 1}, {"steps", -3}}});
  EXPECT_EQ(error_of(j), "p.json: variants[0]: 'steps' is -3: a count is >= 0");
}

TEST(PlanFile, KindIsOneOfThreeNamesNeverReadAsTheFirst) {
  json j = to_json(small_plan());
  j["variants"] = json::array({json{{"after", 0}, {"steps", 2}, {"ops", {{{"name", "x"}, {"kind", "copy"}}}}}});
  EXPECT_EQ(error_of(j), "p.json: variants[0]: ops[0]: 'kind' is \"copy\": kernel, memcpy or memset");
  j["variants"][0]["ops"][0]["kind"] = "memset";
  EXPECT_EQ(plan_file_from_json(j, "p.json").variants[0].ops[0].second, trace::OpKind::memset);
}

TEST(PlanFile, GraphIsReadOnlyWithGraphLaunchAndUnknownKeysAreIgnored) {
  PlanFile p = small_plan();
  p.positions[1].graph_id = 5;
  p.positions[1].graph_launch = 0;
  p.positions[2].graph_id = 5;
  p.positions[2].graph_launch = 0;
  json j = to_json(p);
  EXPECT_EQ(j["positions"][1]["graph"], 5);
  EXPECT_FALSE(j["positions"][0].contains("graph"));
  EXPECT_EQ(to_json(plan_file_from_json(j, "p.json")), j);  // read back unchanged
  j["positions"][0]["graph"] = "not read";  // without 'graph_launch' a 'graph' is not read (nor checked)
  j["a_later_field"] = {{"x", 1}};
  j["positions"][0]["another"] = 2;
  const PlanFile q = plan_file_from_json(j, "p.json");
  EXPECT_EQ(q.positions[0].graph_launch, -1);
  EXPECT_EQ(q.positions[0].graph_id, 0u);
  j["positions"][2].erase("graph");
  EXPECT_EQ(error_of(j), "p.json: positions[2]: 'graph_launch' needs 'graph', a CUDA graph id > 0");
  j["positions"][2]["graph"] = 0;
  EXPECT_EQ(error_of(j), "p.json: positions[2]: 'graph_launch' needs 'graph', a CUDA graph id > 0");
}

TEST(PlanFile, ReadRefusesMissingEmptyNotJsonAndDirectories) {
  TmpDir t;
  auto msg = [](const std::string& path) -> std::string {
    try {
      read_plan_file(path);
    } catch (const PlanFileError& e) {
      return e.what();
    }
    return "";
  };
  const std::string missing = (t.dir / "missing.json").string();
  EXPECT_EQ(msg(missing), missing + ": cannot open: no such file");
  const std::string empty = t.write("empty.json", "");
  EXPECT_EQ(msg(empty), empty + ": empty file (0 bytes): not a plan");
  const std::string cut = t.write("cut.json", "{\"format\": \"gearshift-plan\", \"version\": 1, \"positions\": [");
  EXPECT_NE(msg(cut).find(cut + ": not valid JSON (byte "), std::string::npos) << msg(cut);
  EXPECT_NE(msg(cut).find("truncated"), std::string::npos) << msg(cut);
  const std::string junk = t.write("junk.json", "format: gearshift-plan");
  EXPECT_NE(msg(junk).find(junk + ": not valid JSON (byte 2): a syntax error there"), std::string::npos) << msg(junk);
  // A directory given as the plan: before, `replay --plan DIR` ended in "internal error: basic_filebuf::underflow".
  EXPECT_EQ(msg(t.dir.string()), t.dir.string() + ": is a directory, not a plan file (pass the plan.json inside it)");
  // A UTF-8 BOM an editor put in front is no reason to refuse the plan.
  const std::string bom = t.write("bom.json", "\xEF\xBB\xBF" + to_json(small_plan()).dump());
  EXPECT_EQ(msg(bom), "");
}

TEST(PlanFile, WriteRefusesUnwritablePathsAndKeepsTheOldFile) {
  TmpDir t;
  try {
    write_plan_file(small_plan(), "/nonexistent/dir/plan.json");
    FAIL() << "written";
  } catch (const PlanFileError& e) {
    EXPECT_STREQ(e.what(), "/nonexistent/dir/plan.json: cannot write the plan: directory /nonexistent/dir does not exist");
  }
  EXPECT_THROW(write_plan_file(small_plan(), t.dir.string()), PlanFileError);
  // An invalid plan is not written over a good one.
  const std::string path = (t.dir / "plan.json").string();
  write_plan_file(small_plan(), path);
  PlanFile bad = small_plan();
  bad.period_us = -1;
  EXPECT_THROW(write_plan_file(bad, path), PlanFileError);
  EXPECT_EQ(read_plan_file(path).period_us, 100);
}

TEST(PlanFile, PositionMatchShareTellsAnotherJobsPlan) {
  using K = std::vector<std::pair<std::string, trace::OpKind>>;
  const K a{{"a", trace::OpKind::kernel}, {"b", trace::OpKind::kernel}, {"c", trace::OpKind::memcpy}};
  EXPECT_DOUBLE_EQ(position_match_share(a, a), 1);
  K b = a;
  b[2].second = trace::OpKind::kernel;  // same name, another kind
  EXPECT_DOUBLE_EQ(position_match_share(a, b), 2.0 / 3);
  const K longer{{"a", trace::OpKind::kernel}, {"x", trace::OpKind::kernel}, {"b", trace::OpKind::kernel},
                 {"c", trace::OpKind::memcpy}, {"y", trace::OpKind::kernel}, {"z", trace::OpKind::kernel}};
  EXPECT_DOUBLE_EQ(position_match_share(a, longer), 0.5);
  EXPECT_DOUBLE_EQ(position_match_share(longer, a), 0.5);
  EXPECT_DOUBLE_EQ(position_match_share(a, K{{"q", trace::OpKind::kernel}}), 0);
}

}  // namespace
}  // namespace gearshift::plan
