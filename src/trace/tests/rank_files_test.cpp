// The per-rank trace files of one `gearshift trace -o FILE` run, found in a directory in rank order.
#include "trace/rank_files.hpp"

#include <unistd.h>

#include <fstream>
#include <stdexcept>

#include <gtest/gtest.h>

namespace gearshift::trace {
namespace {

namespace fs = std::filesystem;

struct Dir {
  fs::path p = fs::temp_directory_path() / ("gs-rank-files-" + std::to_string(::getpid()) + "-" +
                                            ::testing::UnitTest::GetInstance()->current_test_info()->name());
  Dir() {
    fs::remove_all(p);
    fs::create_directories(p);
  }
  ~Dir() { fs::remove_all(p); }
  void touch(const std::string& name) const { std::ofstream(p / name) << "{}"; }
  std::string at(const std::string& name) const { return (p / name).string(); }
};

TEST(RankTraceFiles, FileIsTheLowestRankThenEachRankPidFilesSkipped) {
  Dir d;
  for (const char* n : {"t.json.gz", "t.rank2.json.gz", "t.rank1.json.gz", "t.pid4242.json.gz", "notes.txt"}) d.touch(n);
  const RankFiles f = rank_trace_files(d.p);
  ASSERT_EQ(f.ranks.size(), 3u);
  EXPECT_EQ(f.ranks[0], d.at("t.json.gz"));
  EXPECT_EQ(f.ranks[1], d.at("t.rank1.json.gz"));
  EXPECT_EQ(f.ranks[2], d.at("t.rank2.json.gz"));
  ASSERT_EQ(f.skipped.size(), 1u);
  EXPECT_EQ(f.skipped[0], d.at("t.pid4242.json.gz"));
}

TEST(RankTraceFiles, RankTenSortsAfterRankTwo) {
  Dir d;
  d.touch("t.jsonl");
  for (int r = 1; r <= 10; ++r) d.touch("t.rank" + std::to_string(r) + ".jsonl");
  const RankFiles f = rank_trace_files(d.p);
  ASSERT_EQ(f.ranks.size(), 11u);
  EXPECT_EQ(f.ranks[2], d.at("t.rank2.jsonl"));
  EXPECT_EQ(f.ranks[10], d.at("t.rank10.jsonl"));
}

TEST(RankTraceFiles, RefusesWhatIsNotOneJobsRanks) {
  auto why = [](const fs::path& p) {
    try {
      rank_trace_files(p);
    } catch (const std::invalid_argument& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  {
    Dir d;
    EXPECT_NE(why(d.p).find("no trace file of a rank"), std::string::npos) << why(d.p);
    d.touch("t.pid7.json");
    EXPECT_NE(why(d.p).find("only .pid<pid> files"), std::string::npos) << why(d.p);
  }
  {
    Dir d;
    d.touch("t.json");
    d.touch("t.rank2.json");  // rank 1 missing
    EXPECT_NE(why(d.p).find("rank 1 has no trace file"), std::string::npos) << why(d.p);
  }
  {
    Dir d;
    d.touch("a.json");
    d.touch("b.json");
    EXPECT_NE(why(d.p).find("2 trace files without a .rank<r> tag"), std::string::npos) << why(d.p);
  }
  {
    Dir d;
    d.touch("a.json");
    d.touch("b.rank1.json");
    EXPECT_NE(why(d.p).find("is not a rank file of"), std::string::npos) << why(d.p);
  }
  {
    Dir d;
    d.touch("t.rank0.json");
    d.touch("t.rank0.json.gz");
    EXPECT_NE(why(d.p).find("two files of rank 0"), std::string::npos) << why(d.p);
  }
  EXPECT_NE(why("/nonexistent/gearshift").find("not a directory"), std::string::npos);
}

}  // namespace
}  // namespace gearshift::trace
