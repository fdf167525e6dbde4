// Every trace file of ../shared/data/bad_inputs gives the result its README names: exit code and the key figure
// or message (docs/step-detection.md). Runs the real binary as a user would.
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <array>
#include <cstdio>
#include <filesystem>
#include <string>

#include "run_binary.hpp"

namespace gearshift {
namespace {

using test::Result;
using test::run;

const std::string kDir = std::string(GEARSHIFT_SHARED_DIR) + "/data/bad_inputs/";
const std::string kBase = "3 detected by";  // "Iterations    3 detected by ...; 805 kernels"

struct Case {
  const char* file;
  const char* args;  // extra arguments
  int code;
  std::vector<std::string> says;  // substrings of the output, all required
};

// The README's expected result, per file (g*, i*, s*; p* and r* are for `pipeline` and `replay`).
const Case kCases[] = {
    {"g01_gpt2_gearshift_format.jsonl.gz", "", 0, {kBase, "805 kernels"}},
    // Version 2 is this build's format (synchronize records): the file the README calls a future version reads.
    {"g02_gearshift_format_version2.jsonl.gz", "", 0, {kBase, "805 kernels"}},
    {"g03_gearshift_format_unknown_tag.jsonl.gz", "", 3, {"line 1507", "unknown record tag"}},
    {"g04_gearshift_format_no_trailer.jsonl.gz", "", 0, {kBase, "805 kernels", "Warning", "no trailer"}},
    {"g05_gearshift_format_cut_mid_line.jsonl.gz", "", 3, {"line 1961", "truncated"}},
    {"g06_gearshift_format_killed_at_80pct_no_trailer.jsonl.gz", "", 0, {"805 kernels", "incomplete trace"}},
    {"i01_autograd2020_missing_quote.json", "", 3, {"byte 284"}},
    {"i01b_autograd2020_fixed_quote.json", "", 3, {"no kernel events"}},
    {"i01c_gpt2_missing_quote_mid.json.gz", "", 3, {"byte 1044382"}},
    {"i02_gpt2_nonutf8_kernel_name.json.gz", "", 0, {kBase, "805 kernels", "invalid UTF-8"}},
    {"i03_gpt2_raw_control_chars_in_name.json.gz", "", 3, {"byte 4872", "control character"}},
    {"i04_gpt2_bigint_args.json.gz", "", 0, {kBase, "805 kernels"}},
    {"i05_gpt2_1200_kernels_ts0_dur0.json.gz", "", 0, {kBase, "805 kernels", "dropped 1200 GPU op(s)", "confidence 1.000"}},
    {"i05b_gpt2_plus_one_full_step_at_ts0.json.gz", "", 0, {kBase, "805 kernels", "dropped 983 GPU op(s)", "0.0855 s"}},
    {"i06_gpt2_negative_dur.json.gz", "", 3, {"negative duration"}},
    {"i06b_gpt2_dur_minus_ts_end0.json.gz", "", 3, {"negative duration"}},
    {"i07_no_gpu_events.json", "", 3, {"no kernel events"}},
    {"i08_gpt2_truncated_gzip.json.gz", "", 3, {"truncated or corrupt gzip"}},
    {"i08b_gpt2_truncated_json_in_valid_gzip.json.gz", "", 3, {"ends in the middle of the JSON"}},
    {"i08c_gpt2_cut_after_event.json.gz", "", 3, {"ends in the middle of the JSON"}},
    {"i09_empty.json", "", 3, {"empty file"}},
    {"i10_directory.json.gz", "", 3, {"directory"}},
    {"i11_empty.json.gz", "", 3, {"empty file"}},
    {"i11b_gzip_of_nothing.json.gz", "", 3, {"empty file"}},
    {"i13_gpt2_one_step.json.gz", "", 4, {"fewer than two whole training steps"}},
    {"i14_ddp_two_gpus_in_one_file.json.gz", "", 0, {"4 detected by", "1799 kernels", "2 devices", "analysed device 0"}},
    {"i14_ddp_two_gpus_in_one_file.json.gz", "--device 1", 0, {"4 detected by", "1799 kernels", "analysed device 1"}},
    {"i15_gpt2_names_with_quotes_escapes.json.gz", "", 0, {kBase, "805 kernels"}},
    {"i15b_gpt2_lone_surrogate_escape.json.gz", "", 3, {"byte 4873", "surrogate"}},
    {"i17_gpt2_two_gzip_members.json.gz", "", 0, {kBase, "805 kernels"}},
    {"i18_gpt2_trailing_garbage.json.gz", "", 3, {"data after the end of the JSON document"}},
    {"i19_gpt2_utf8_bom.json.gz", "", 0, {kBase, "805 kernels"}},
    {"i20_gpt2_pretty_crlf.json.gz", "", 0, {kBase, "805 kernels"}},
    {"i21_gpt2_nan_dur.json.gz", "", 3, {"NaN"}},
    {"i25_gpt2_events_shuffled.json.gz", "", 0, {kBase, "805 kernels"}},
    {"i27_gpt2_absurd_ts.json.gz", "", 3, {"absurd timestamp"}},
    {"i28_gpt2_kernel_30min.json.gz", "", 0, {kBase, "805 kernels", "1800000.000 ms", "left out of the template", "0.085"}},
    {"i29_gpt2_deviceProperties_V100.json.gz", "--gpu h200", 0, {kBase, "Warning", "Tesla V100"}},
    {"i30_gpt2_ts_as_strings.json.gz", "", 0, {kBase, "805 kernels"}},
    {"i31_gpt2_unescaped_quote_python_function.json.gz", "", 3, {"byte 870417"}},
    {"s00_gpt2_with_launches_and_cpu_markers.json.gz", "", 0, {"3 detected by step markers", "805 kernels"}},
    {"s01_gpt2_second_half_ts0_dur0.json.gz", "", 4, {"dropped", "fewer than two whole steps"}},
    {"s02_gpt2_markers_for_dropped_steps.json.gz", "", 0, {"3 detected by step markers", "805 kernels"}},
    {"s05_gpt2_one_kernel_2s_overlapping.json.gz", "", 0, {kBase, "805 kernels", "2000.000 ms", "left out of the template", "0.085"}},
};

TEST(BadInputs, EachFileGivesTheResultItsReadmeNames) {
  if (!std::filesystem::exists(kDir)) GTEST_SKIP() << "../shared/data/bad_inputs absent beside this checkout";
  for (const Case& c : kCases) {
    Result r = run(std::string("plan ") + c.args + " " + kDir + c.file);
    EXPECT_EQ(r.code, c.code) << c.file << "\n" << r.out;
    for (const auto& s : c.says) EXPECT_NE(r.out.find(s), std::string::npos) << c.file << " lacks '" << s << "'\n" << r.out;
    EXPECT_EQ(r.out.find("internal error"), std::string::npos) << c.file;
  }
}

TEST(BadInputs, EveryTraceFileOfTheFolderHasACase) {
  if (!std::filesystem::exists(kDir)) GTEST_SKIP() << "../shared/data/bad_inputs absent beside this checkout";
  for (const auto& e : std::filesystem::directory_iterator(kDir)) {
    const std::string name = e.path().filename().string();
    if (name[0] != 'g' && name[0] != 'i' && name[0] != 's') continue;
    if (name == "gen_huge.py") continue;  // a generator; its 300 MB output is the import benchmark's input
    bool found = false;
    for (const Case& c : kCases) found |= name == c.file;
    EXPECT_TRUE(found) << name << " has no expected result here";
  }
}

}  // namespace
}  // namespace gearshift
