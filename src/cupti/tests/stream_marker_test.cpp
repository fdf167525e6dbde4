// Stream markers' state machine (no CUDA): claims, the poll that sees the GPU's write, give-ups; and the
// runtime feed's M lines.
#include "cupti/stream_marker.hpp"

#include <time.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "cupti/runtime_feed.hpp"

namespace gearshift::cupti {
namespace {

TEST(StreamMarkers, OffUntilAPeriodIsSet) {
  StreamMarkers m;
  EXPECT_FALSE(m.claim(1'000, 1));
  m.set_period_ns(2'000'000);
  EXPECT_TRUE(m.claim(1'000, 1));
  EXPECT_TRUE(m.claimed_by(1));
  EXPECT_FALSE(m.claimed_by(2));
}

// One outstanding marker at a time; it is seen by the first poll after the GPU wrote its number, between that
// poll and the one before; the next claim comes one period after it was seen.
TEST(StreamMarkers, OneOutstandingMarkerSeenBetweenTwoPolls) {
  std::uint64_t word = 0;
  StreamMarkers m;
  m.set_word(&word);
  m.set_period_ns(2'000'000);
  ASSERT_TRUE(m.claim(10'000'000, 42));
  EXPECT_FALSE(m.claim(10'000'001, 43));  // claimed, not yet issued
  EXPECT_TRUE(m.claimed_by(42));
  EXPECT_FALSE(m.claimed_by(43));
  const std::uint64_t seq = m.next_sequence();
  EXPECT_EQ(seq, 1u);
  m.issued(seq);
  EXPECT_FALSE(m.claimed_by(42));         // issued: no longer a claim an exit may act on
  EXPECT_FALSE(m.claim(10'500'000, 44));  // outstanding
  EXPECT_FALSE(m.poll(10'400'000));       // not written yet
  EXPECT_FALSE(m.poll(10'900'000));
  word = seq;                             // the GPU passed the kernel
  auto seen = m.poll(11'400'000);
  ASSERT_TRUE(seen);
  EXPECT_EQ(seen->correlation, 42u);
  EXPECT_EQ(seen->not_before_ns, 10'900'000);
  EXPECT_EQ(seen->seen_ns, 11'400'000);
  EXPECT_FALSE(m.poll(11'900'000));       // seen once
  EXPECT_FALSE(m.claim(13'000'000, 45));  // within the period after it was seen
  ASSERT_TRUE(m.claim(13'400'000, 50));
  EXPECT_EQ(m.next_sequence(), 2u);
  m.issued(2);
  word = 2;
  seen = m.poll(13'500'000);
  ASSERT_TRUE(seen);
  EXPECT_EQ(seen->not_before_ns, 13'400'000);  // the previous poll came before its issue
  const MarkerStats st = m.stats();
  EXPECT_EQ(st.issued, 2u);
  EXPECT_EQ(st.seen, 2u);
  EXPECT_EQ(st.abandoned, 0u);
}

TEST(StreamMarkers, AbandonedAndLostMarkersFreeTheSlot) {
  std::uint64_t word = 0;
  StreamMarkers m;
  m.set_word(&word);
  m.set_period_ns(1'000'000);
  ASSERT_TRUE(m.claim(0, 1));
  m.abandon(5'000'000);                // e.g. the stream was capturing
  EXPECT_FALSE(m.claim(5'500'000, 2));  // one period later
  ASSERT_TRUE(m.claim(6'000'000, 7));
  m.issued(m.next_sequence());
  EXPECT_FALSE(m.poll(6'000'000 + StreamMarkers::kGiveUpNs));  // not yet given up
  EXPECT_FALSE(m.poll(6'000'001 + StreamMarkers::kGiveUpNs));  // given up: never written
  EXPECT_TRUE(m.claim(7'000'001 + StreamMarkers::kGiveUpNs, 8));
  EXPECT_EQ(m.stats().abandoned, 2u);
}

TEST(StreamMarkers, DisabledForGood) {
  StreamMarkers m;
  m.set_period_ns(1'000'000);
  m.disable();
  m.set_period_ns(1'000'000);
  EXPECT_EQ(m.period_ns(), 0);
  EXPECT_FALSE(m.claim(10'000'000, 1));
}

// Many launch threads, one writer: exactly one claim is outstanding at a time (run under TSan too).
TEST(StreamMarkers, ClaimsFromManyThreadsNeverOverlap) {
  std::uint64_t word = 0;
  StreamMarkers m;
  m.set_word(&word);
  m.set_period_ns(1);
  std::atomic<int> holders{0}, overlaps{0}, issued{0};
  std::atomic<bool> done{false};
  std::vector<std::thread> ts;
  for (int t = 0; t < 4; ++t)
    ts.emplace_back([&, t] {
      for (int i = 0; i < 2000; ++i) {
        if (!m.claim(i, static_cast<std::uint32_t>(t))) continue;
        if (holders.fetch_add(1) != 0) overlaps.fetch_add(1);
        const std::uint64_t seq = m.next_sequence();
        holders.fetch_sub(1);
        m.issued(seq);
        issued.fetch_add(1);
      }
    });
  std::thread poller([&] {
    std::int64_t now = 0;
    while (!done.load()) {
      __atomic_store_n(&word, m.next_sequence() - 1, __ATOMIC_RELEASE);  // the GPU: every issued one written
      m.poll(++now);
    }
  });
  for (auto& t : ts) t.join();
  done = true;
  poller.join();
  EXPECT_EQ(overlaps.load(), 0);
  EXPECT_GT(issued.load(), 0);
  EXPECT_EQ(m.stats().issued, static_cast<std::uint64_t>(issued.load()));
}

std::int64_t mono_ns() {
  timespec ts{};
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<std::int64_t>(ts.tv_sec) * 1'000'000'000 + ts.tv_nsec;
}

// The feed's writer polls the markers and writes an M line after the marker's launch line.
TEST(StreamMarkers, FeedWritesTheMarkerAfterItsLaunch) {
  int p[2];
  ASSERT_EQ(pipe(p), 0);
  std::uint64_t word = 0;
  StreamMarkers m;
  m.set_word(&word);
  m.set_period_ns(1);
  std::int64_t t0 = mono_ns();
  {
    RuntimeFeed feed(p[1], &mono_ns, 100'000);
    feed.set_markers(&m);
    ASSERT_TRUE(m.claim(t0, 9));
    feed.on_launch(LaunchEvent{9, LaunchApi::kernel, t0, "k"});
    m.issued(m.next_sequence());
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
    __atomic_store_n(&word, 1, __ATOMIC_RELEASE);
    while (m.stats().seen == 0 && mono_ns() - t0 < 2'000'000'000) std::this_thread::sleep_for(std::chrono::microseconds(50));
    feed.stop();
    EXPECT_EQ(feed.stats().markers, 1u);
  }
  std::string all;
  char buf[4096];
  for (ssize_t n; (n = read(p[0], buf, sizeof buf)) > 0;) all.append(buf, static_cast<std::size_t>(n));
  close(p[0]);
  std::stringstream ss(all);
  std::vector<std::string> lines;
  for (std::string l; std::getline(ss, l);) lines.push_back(l);
  ASSERT_EQ(lines.size(), 2u) << all;
  EXPECT_TRUE(lines[0].starts_with("L ")) << lines[0];
  std::int64_t corr = 0, not_before = 0, seen = 0;
  ASSERT_EQ(std::sscanf(lines[1].c_str(), "M %ld %ld %ld", &corr, &not_before, &seen), 3) << lines[1];
  EXPECT_EQ(corr, 9);
  // The feed maps its clock to CLOCK_MONOTONIC by a measured offset (monotonic_offset_ns: within half its
  // tightest bracket): the same clock here, so off by up to that (5 ns below t0 once on a loaded 2-core machine).
  EXPECT_GE(not_before, t0 - 100'000);
  EXPECT_GE(seen - t0, 2'000'000);  // written after the 2 ms sleep
  EXPECT_LE(seen - not_before, 50'000'000);  // two consecutive polls (100 µs apart when not starved)
}

}  // namespace
}  // namespace gearshift::cupti
