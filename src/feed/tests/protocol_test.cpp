// The launch feed's protocol: every line the writers make parses back to the same event (round trip, every
// kind), and the malformed lines a reader must refuse.
#include "feed/protocol.hpp"

#include <map>

#include <gtest/gtest.h>

namespace gearshift::feed {
namespace {

std::string one_line(const std::string& s) {
  EXPECT_TRUE(!s.empty() && s.back() == '\n' && s.find('\n') == s.size() - 1) << s;
  return s.substr(0, s.size() - 1);
}

TEST(FeedRoundTrip, EveryEventKind) {
  std::string l;
  append_launch_line(l, 1'700'000'000'123, 4'294'967'295, "void gemm<128, 64>(float const*, int)");
  const std::string launch = one_line(l);  // the event's name is a view into it
  auto e = parse_feed_line(launch);
  ASSERT_TRUE(e);
  EXPECT_EQ(e->kind, FeedEvent::Kind::launch);
  EXPECT_EQ(e->cpu_ns, 1'700'000'000'123);
  EXPECT_EQ(e->correlation, 4'294'967'295);
  EXPECT_EQ(e->name, "void gemm<128, 64>(float const*, int)");

  std::string c;
  append_completion_line(c, 7, 1000, 2500, 13, 3);
  e = parse_feed_line(one_line(c));
  ASSERT_TRUE(e);
  EXPECT_EQ(e->kind, FeedEvent::Kind::complete);
  EXPECT_EQ(e->correlation, 7);
  EXPECT_EQ(e->gpu_start_ns, 1000);
  EXPECT_EQ(e->gpu_end_ns, 2500);
  EXPECT_EQ(e->stream, 13);
  EXPECT_EQ(e->device, 3);

  std::string cn;
  append_completion_line(cn, 7, 1000, 2500, 13, 3, 42);
  EXPECT_EQ(cn, "C 7 1000 2500 13 3 42\n");
  e = parse_feed_line(one_line(cn));
  ASSERT_TRUE(e);
  EXPECT_EQ(e->kind, FeedEvent::Kind::complete);
  EXPECT_EQ(e->device, 3);
  EXPECT_EQ(e->name_id, 42);
  EXPECT_EQ(parse_feed_line(one_line(c))->name_id, -1);  // no name id: its launch names it

  std::string n;
  append_name_line(n, 42, "void gemm<128,\n 64>()");
  const std::string name = one_line(n);
  e = parse_feed_line(name);
  ASSERT_TRUE(e);
  EXPECT_EQ(e->kind, FeedEvent::Kind::name);
  EXPECT_EQ(e->name_id, 42);
  EXPECT_EQ(e->name, "void gemm<128,  64>()");

  std::string s;
  append_sync_line(s, 9, 3000, 4200);
  e = parse_feed_line(one_line(s));
  ASSERT_TRUE(e);
  EXPECT_EQ(e->kind, FeedEvent::Kind::sync);
  EXPECT_EQ(e->correlation, 9);
  EXPECT_EQ(e->gpu_start_ns, 3000);
  EXPECT_EQ(e->gpu_end_ns, 4200);

  std::string m;
  append_marker_line(m, 11, 5000, 5100);
  e = parse_feed_line(one_line(m));
  ASSERT_TRUE(e);
  EXPECT_EQ(e->kind, FeedEvent::Kind::marker);
  EXPECT_EQ(e->correlation, 11);
  EXPECT_EQ(e->gpu_start_ns, 5000);
  EXPECT_EQ(e->gpu_end_ns, 5100);

  std::string y;
  append_copy_line(y, 13, 6000, 6800, 7, 1, 4096, false, "Memcpy HtoD (Pageable -> Device)");
  EXPECT_EQ(y, "Y 13 6000 6800 7 1 4096 c Memcpy HtoD (Pageable -> Device)\n");
  const std::string copy = one_line(y);
  e = parse_feed_line(copy);
  ASSERT_TRUE(e);
  EXPECT_EQ(e->kind, FeedEvent::Kind::copy);
  EXPECT_EQ(e->correlation, 13);
  EXPECT_EQ(e->gpu_start_ns, 6000);
  EXPECT_EQ(e->gpu_end_ns, 6800);
  EXPECT_EQ(e->stream, 7);
  EXPECT_EQ(e->device, 1);
  EXPECT_EQ(e->bytes, 4096);
  EXPECT_FALSE(e->memset);
  EXPECT_EQ(e->name, "Memcpy HtoD (Pageable -> Device)");

  std::string z;
  append_copy_line(z, 14, 7000, 7000, 0, 0, 0, true, "");  // no label: the kind's own word
  const std::string set = one_line(z);
  e = parse_feed_line(set);
  ASSERT_TRUE(e);
  EXPECT_TRUE(e->memset);
  EXPECT_EQ(e->name, "Memset");
}

TEST(FeedWrite, TheLinesAsWritten) {
  std::string out;
  append_launch_line(out, 123, 7, "gelu(float*)");
  append_completion_line(out, 7, 1000, 2500, 13, 1);
  append_sync_line(out, 9, 3000, 4200);
  append_marker_line(out, 10, 4300, 4400);
  EXPECT_EQ(out, "L 123 7 gelu(float*)\nC 7 1000 2500 13 1\nS 9 3000 4200\nM 10 4300 4400\n");
  EXPECT_EQ(activity_command(5'000'000'000, 200'000'000), "A 5000 200\n");  // ns in, ms on the wire
  EXPECT_EQ(marker_command(0), "M 0\n");
  EXPECT_EQ(marker_command(2'000'000), "M 2000\n");  // ns in, µs on the wire
}

TEST(FeedRoundTrip, ANameWithNewlinesStaysOneLine) {
  std::string l;
  append_launch_line(l, -1, 8, "bad\nname\r");
  EXPECT_EQ(l, "L -1 8 bad name \n");
  const std::string line = one_line(l);  // the event's name is a view into it
  auto e = parse_feed_line(line);
  ASSERT_TRUE(e);
  EXPECT_EQ(e->name, "bad name ");
}

TEST(FeedParse, LaunchLine) {
  EXPECT_FALSE(parse_feed_line("L 100 7"));
  EXPECT_FALSE(parse_feed_line("L 100 7 "));
  EXPECT_FALSE(parse_feed_line("L 100 x a"));
  EXPECT_FALSE(parse_feed_line("L 100-7 a"));
  auto e = parse_feed_line("L  100   7 a kernel name with spaces");  // more than one space between fields
  ASSERT_TRUE(e);
  EXPECT_EQ(e->correlation, 7);
  EXPECT_EQ(e->name, "a kernel name with spaces");
}

TEST(FeedParse, CompletionLineOldAndExtendedForms) {
  auto old = parse_feed_line("C 7 100 200");
  ASSERT_TRUE(old);
  EXPECT_EQ(old->stream, 0);
  EXPECT_EQ(old->device, 0);
  auto with_stream = parse_feed_line("C 8 300 400 13");
  ASSERT_TRUE(with_stream);
  EXPECT_EQ(with_stream->stream, 13);
  EXPECT_EQ(with_stream->device, 0);
  auto full = parse_feed_line("C 9 500 650 7 3 ");
  ASSERT_TRUE(full);
  EXPECT_EQ(full->device, 3);
  EXPECT_FALSE(parse_feed_line("C 7 100"));
  EXPECT_FALSE(parse_feed_line("C 7 100 200 x"));           // stream not a number
  EXPECT_FALSE(parse_feed_line("C 7 100 200 -1"));          // negative stream
  EXPECT_FALSE(parse_feed_line("C 7 100 200 1 2 3 4"));     // a field too many
  EXPECT_FALSE(parse_feed_line("C 7 100 200 1 2 -3"));      // negative name id
  EXPECT_FALSE(parse_feed_line("C 7 100 200 1 2 x"));       // name id not a number
  EXPECT_FALSE(parse_feed_line("N 3"));                     // no name
  EXPECT_FALSE(parse_feed_line("N 3 "));
  EXPECT_FALSE(parse_feed_line("N -3 gemm"));               // negative id
  EXPECT_FALSE(parse_feed_line("N x gemm"));
  EXPECT_FALSE(parse_feed_line("C 7 100 200 4294967296"));  // stream beyond int32
  EXPECT_FALSE(parse_feed_line("X 1 2 3"));
  EXPECT_FALSE(parse_feed_line(""));
}

TEST(FeedParse, SyncAndMarkerLines) {
  EXPECT_TRUE(parse_feed_line("S 12 1000 1000 "));
  EXPECT_FALSE(parse_feed_line("S 12 1000"));
  EXPECT_FALSE(parse_feed_line("S 12 2500 1000"));    // returned before it was entered
  EXPECT_FALSE(parse_feed_line("S 12 1000 2500 3"));  // a field too many
  EXPECT_FALSE(parse_feed_line("S x 1000 2500"));
  EXPECT_FALSE(parse_feed_line("M 12 1400 1000"));  // seen before the poll that had not seen it
  EXPECT_FALSE(parse_feed_line("M 12 1000"));
  EXPECT_FALSE(parse_feed_line("M 12 1000 1400 1"));
  EXPECT_FALSE(parse_feed_line("H 1 540 0 0 1 -"));  // a hello is no event
}

TEST(FeedParse, CopyLine) {
  EXPECT_TRUE(parse_feed_line("Y 5 100 200 3 0 64 s Memset (Device)"));
  EXPECT_FALSE(parse_feed_line("Y 5 100 200 3 0 64 c"));       // no label
  EXPECT_FALSE(parse_feed_line("Y 5 100 200 3 0 64 c "));
  EXPECT_FALSE(parse_feed_line("Y 5 100 200 3 0 64 x Memcpy"));  // neither c nor s
  EXPECT_FALSE(parse_feed_line("Y 5 100 200 3 0 64 cMemcpy"));
  EXPECT_FALSE(parse_feed_line("Y 5 200 100 3 0 64 c Memcpy"));  // ends before it starts
  EXPECT_FALSE(parse_feed_line("Y 5 100 200 3 0 -1 c Memcpy"));  // negative size
  EXPECT_FALSE(parse_feed_line("Y 5 100 200 -3 0 64 c Memcpy"));  // negative stream
  EXPECT_FALSE(parse_feed_line("Y 5 100 200 3 0 c Memcpy"));     // no size
}

TEST(FeedHello, RoundTripsEveryForm) {
  const Hello cases[] = {
      {kHelloVersion, 540, -1, -1, -1, std::nullopt},     // no launcher, CUDA_VISIBLE_DEVICES unset
      {kHelloVersion, 541, 3, 1, 8, std::string("2,3")},  // torchrun on the second of two GPUs
      {kHelloVersion, 542, 0, 0, 1, std::string("")},     // set and empty: no GPU
      {kHelloVersion, 543, 0, 0, 1, std::string("GPU-5e0c9a1d-xx, MIG-1")},
  };
  for (const Hello& h : cases) {
    std::string l;
    append_hello_line(l, h);
    auto back = parse_hello_line(one_line(l));
    ASSERT_TRUE(back) << l;
    EXPECT_EQ(*back, h) << l;
  }
  std::string l;
  append_hello_line(l, cases[0]);
  EXPECT_EQ(l, "H 1 540 -1 -1 -1 -\n");
}

TEST(FeedHello, RefusesMalformedLines) {
  EXPECT_FALSE(parse_hello_line("H 1 540 0 0 1"));       // no <visible>
  EXPECT_FALSE(parse_hello_line("H 2 540 0 0 1 -"));     // another version
  EXPECT_FALSE(parse_hello_line("H 1 0 0 0 1 -"));       // no pid
  EXPECT_FALSE(parse_hello_line("H 1 540 -2 0 1 -"));    // rank below -1
  EXPECT_FALSE(parse_hello_line("H 1 540 x 0 1 -"));
  EXPECT_FALSE(parse_hello_line("H 1 540 0 0 1 0,1"));   // value without '='
  EXPECT_FALSE(parse_hello_line("H 1 540 0 0 1 - x"));
  EXPECT_FALSE(parse_hello_line("L 1 540 0 0 1 -"));
  EXPECT_FALSE(parse_hello_line(""));
  EXPECT_TRUE(parse_hello_line("H 1 540 0 0 1 - "));
}

TEST(FeedHello, FromTheLaunchersVariables) {
  auto from = [](std::map<std::string, std::string> env) {
    return hello_from_env(77, [&](const char* k) -> const char* {
      auto it = env.find(k);
      return it == env.end() ? nullptr : it->second.c_str();
    });
  };
  Hello none = from({});
  EXPECT_EQ(none.pid, 77);
  EXPECT_EQ(none.rank, -1);
  EXPECT_EQ(none.local_rank, -1);
  EXPECT_EQ(none.world_size, -1);
  EXPECT_FALSE(none.cuda_visible_devices);
  Hello torchrun = from({{"RANK", "3"}, {"LOCAL_RANK", "1"}, {"WORLD_SIZE", "8"}, {"CUDA_VISIBLE_DEVICES", "0,1"},
                         {"SLURM_PROCID", "9"}});
  EXPECT_EQ(torchrun.rank, 3);  // torchrun's RANK before Slurm's
  EXPECT_EQ(torchrun.local_rank, 1);
  EXPECT_EQ(torchrun.world_size, 8);
  EXPECT_EQ(torchrun.cuda_visible_devices, "0,1");
  Hello slurm = from({{"SLURM_PROCID", "5"}, {"SLURM_LOCALID", "1"}, {"SLURM_NTASKS", "16"}});
  EXPECT_EQ(slurm.rank, 5);
  EXPECT_EQ(slurm.local_rank, 1);
  EXPECT_EQ(slurm.world_size, 16);
  Hello mpi = from({{"RANK", "x"}, {"OMPI_COMM_WORLD_RANK", "2"}, {"OMPI_COMM_WORLD_LOCAL_RANK", "0"},
                    {"OMPI_COMM_WORLD_SIZE", "4"}, {"CUDA_VISIBLE_DEVICES", ""}});
  EXPECT_EQ(mpi.rank, 2);  // a RANK that is no number is skipped
  EXPECT_EQ(mpi.local_rank, 0);
  EXPECT_EQ(mpi.world_size, 4);
  EXPECT_EQ(mpi.cuda_visible_devices, "");
}

TEST(FeedCorrelation, NamespacedPerConnection) {
  EXPECT_EQ(namespaced_correlation(0, 7), 7);
  EXPECT_EQ(namespaced_correlation(1, 7), (std::int64_t{1} << 32) + 7);
  EXPECT_NE(namespaced_correlation(1, 7), namespaced_correlation(2, 7));
  EXPECT_EQ(namespaced_correlation(3, 4'294'967'295), (std::int64_t{3} << 32) + 4'294'967'295);
  EXPECT_EQ(namespaced_correlation(2, 4'294'967'296), std::int64_t{2} << 32);  // beyond 32 bits: wraps, no spill
}

TEST(FeedControl, RoundTripsAndRefuses) {
  auto a = parse_control_line(one_line(activity_command(5'000'000'000, 200'000'000)));
  ASSERT_TRUE(a && a->windows && !a->marker_period_ns);
  EXPECT_EQ(a->windows->period_ns, 5'000'000'000);
  EXPECT_EQ(a->windows->window_ns, 200'000'000);
  auto m = parse_control_line(one_line(marker_command(2'000'000)));
  ASSERT_TRUE(m && m->marker_period_ns && !m->windows);
  EXPECT_EQ(*m->marker_period_ns, 2'000'000);
  // The wire's ms and µs as the job reads them: "A 5000 200" is 5 s and 200 ms, "M 500" 500 µs.
  auto wire = parse_control_line("A 5000 200");
  ASSERT_TRUE(wire && wire->windows);
  EXPECT_EQ(wire->windows->period_ns, 5'000'000'000);
  EXPECT_EQ(wire->windows->window_ns, 200'000'000);
  EXPECT_EQ(*parse_control_line("M 500")->marker_period_ns, 500'000);
  EXPECT_TRUE(parse_control_line("A 0 0"));
  EXPECT_TRUE(parse_control_line("A 100 0 "));
  EXPECT_TRUE(parse_control_line("M 0 "));
  EXPECT_FALSE(parse_control_line("A 100 200"));  // window longer than the period
  EXPECT_FALSE(parse_control_line("A 100"));
  EXPECT_FALSE(parse_control_line("A -1 0"));
  EXPECT_FALSE(parse_control_line("A 1 0 7"));
  EXPECT_FALSE(parse_control_line("B 1 0"));
  EXPECT_FALSE(parse_control_line(""));
  EXPECT_FALSE(parse_control_line("M"));
  EXPECT_FALSE(parse_control_line("M -5"));
  EXPECT_FALSE(parse_control_line("M 10 10"));
  EXPECT_FALSE(parse_control_line("M2000"));
  // The feed off: no field.
  auto o = parse_control_line(one_line(off_command()));
  ASSERT_TRUE(o && o->off && !o->windows && !o->marker_period_ns);
  EXPECT_FALSE(o->empty());
  EXPECT_TRUE(parse_control_line("O  "));
  EXPECT_FALSE(parse_control_line("O 1"));
  EXPECT_FALSE(parse_control_line("OFF"));
  EXPECT_FALSE(a->off);
}

}  // namespace
}  // namespace gearshift::feed
