#include <gtest/gtest.h>

#include "monitor/counter_tick.hpp"

namespace gearshift::monitor {
namespace {

// A counter that steps every `period` ns of a clock of its own: `watts` × the time up to its last step, mJ; each
// read takes `read_ns` (≈4 ms on an H200) and a sleep advances the clock.
struct FakeCounter {
  Ns now = 0, period = 100'000'000, read_ns = 4'000'000;
  double watts = 400;
  bool stalled = false;
  int reads = 0;
  CounterSource source() {
    return {[this]() -> std::optional<std::uint64_t> {
              ++reads;
              now += read_ns / 2;  // the value is taken in the middle of the read
              const Ns ticked = stalled ? 0 : now / period * period;
              const auto mj = static_cast<std::uint64_t>(watts * static_cast<double>(ticked) * 1e-6);
              now += read_ns - read_ns / 2;
              return mj;
            },
            [this] { return now; }, [this](Ns ns) { now += ns; }};
  }
};

TickWait waiting(Ns max_wait_ns = 0) {
  TickWait w;
  w.gap_ns = 2'000'000;
  w.max_wait_ns = max_wait_ns;
  return w;
}

TEST(ReadAtTick, LandsOnTheNextTickWithinTheReadsAroundIt) {
  FakeCounter c;
  c.now = 1'234'000'000;  // 34 ms after a tick
  const auto r = read_at_tick(c.source(), waiting(150'000'000));
  ASSERT_TRUE(r);
  EXPECT_TRUE(r->located);
  EXPECT_NEAR(static_cast<double>(r->t_ns), 1'300'000'000.0, static_cast<double>(r->uncertainty_ns) / 2);
  EXPECT_LE(r->uncertainty_ns, 2 * c.read_ns + 2'000'000);  // a read, the gap, a read
  EXPECT_DOUBLE_EQ(r->j, 400 * 1.3);                           // the energy up to that tick, J
}

// Over a 1.2 s window a plain read at each end errs by up to a tick's 100 ms (8 %); at ticks by under 1 %.
TEST(WindowPower, AtTicksIsTheCountersOwnPower) {
  FakeCounter c;
  c.now = 5'090'000'000;  // 90 ms after a tick
  const auto a = read_at_tick(c.source(), waiting(150'000'000));
  c.now += 1'150'000'000;
  const auto b = read_at_tick(c.source(), waiting(150'000'000));
  ASSERT_TRUE(a && b);
  const auto w = window_power(*a, *b);
  ASSERT_TRUE(w);
  EXPECT_TRUE(w->located);
  EXPECT_NEAR(w->watts, 400, 400 * w->error);
  EXPECT_LT(w->error, 0.01);
  EXPECT_NEAR(w->seconds, 1.2, 0.011);
  // What plain reads at the same two moments gave: the first 90 ms after its tick, the second 40 ms after its.
  const CounterAtTick pa{5'090'000'000, c.period, 400 * 5.0, false}, pb{6'240'000'000, c.period, 400 * 6.2, false};
  const auto p = window_power(pa, pb);
  ASSERT_TRUE(p);
  EXPECT_NEAR(p->watts, 400 * 1.2 / 1.15, 0.01);  // 417.4 W: +4.3 %
  EXPECT_NEAR(p->error, 0.1 / 1.15, 1e-9);        // its bound, one tick over the window
}

TEST(ReadAtTick, AStalledCounterGivesThePlainReadNotLocated) {
  FakeCounter c;
  c.stalled = true;
  c.now = 1'000'000'000;
  const auto r = read_at_tick(c.source(), waiting(150'000'000));
  ASSERT_TRUE(r);
  EXPECT_FALSE(r->located);
  EXPECT_EQ(r->uncertainty_ns, c.period);
  EXPECT_GE(c.now, 1'150'000'000);  // waited its 150 ms, no more than a read past them
  EXPECT_LE(c.now, 1'150'000'000 + c.read_ns + 2'000'000);
}

TEST(ReadAtTick, AFailedFirstReadGivesNothing) {
  FakeCounter c;
  CounterSource s = c.source();
  s.read_mj = [] { return std::optional<std::uint64_t>(); };
  std::string why;
  EXPECT_FALSE(read_at_tick(s, waiting(), &why));
  EXPECT_EQ(why, "the energy counter could not be read");
}

// A tick bracketed by more than max_bracket_ns (here every read takes 9 ms: 20 ms brackets) is passed over for the
// next one, max_passed_over times; then the loose one is taken, its bracket as its uncertainty.
TEST(ReadAtTick, PassesOverALooselyBracketedTick) {
  FakeCounter c;
  c.read_ns = 9'000'000;
  c.now = 1'050'000'000;
  TickWait w = waiting();
  w.max_passed_over = 2;
  const auto r = read_at_tick(c.source(), w);
  ASSERT_TRUE(r);
  EXPECT_TRUE(r->located);
  EXPECT_GT(r->uncertainty_ns, w.max_bracket_ns);
  EXPECT_NEAR(static_cast<double>(r->t_ns), 1'300'000'000.0, static_cast<double>(r->uncertainty_ns) / 2);  // the 3rd
  // Within a wait too short for that, the latest loose tick stands.
  c.now = 1'050'000'000;
  const auto s = read_at_tick(c.source(), waiting(120'000'000));
  ASSERT_TRUE(s);
  EXPECT_TRUE(s->located);
  EXPECT_NEAR(static_cast<double>(s->t_ns), 1'100'000'000.0, static_cast<double>(s->uncertainty_ns) / 2);
}

TEST(ReadAtTick, AStopEndsTheWaitWithNothingRead) {
  FakeCounter c;
  c.stalled = true;
  TickWait w = waiting();
  w.stop = [&c] { return c.now > 500'000'000; };
  std::string why;
  EXPECT_FALSE(read_at_tick(c.source(), w, &why));
  EXPECT_EQ(why, "stopped");
}

TEST(WindowPower, NoneWithoutTimeOrEnergy) {
  const CounterAtTick a{100, 10, 5.0, true};
  EXPECT_FALSE(window_power(a, a));
  EXPECT_FALSE(window_power(a, CounterAtTick{50, 10, 6.0, true}));   // backwards in time
  EXPECT_FALSE(window_power(a, CounterAtTick{200, 10, 5.0, true}));  // no energy (a wrapped or stuck counter)
}

}  // namespace
}  // namespace gearshift::monitor
