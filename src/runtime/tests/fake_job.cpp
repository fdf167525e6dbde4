// A stand-in training job for `gearshift run` tests (no CUDA): it connects to the runtime's socket
// (GEARSHIFT_RUNTIME_SOCKET), says hello, and launches a step's kernels step after step through the feed, with the
// GPU simulated by sleeping through the kernels' durations. One file above ~600 lines because it is one program:
// its FAKE_JOB_* knobs each bend one loop (run_steps) the way a real job behaved somewhere.
// Usage:
//   runtime_fake_job PLAN STEPS [PIDFILE]      the plan's template step (STEPS < 0: until the feed closes); its
//                                              memcpy/memset positions sent as copies (Y lines) while traced
//   runtime_fake_job --synthetic STEPS [CODE]  a toy transformer step (~51 ms: forward, backward, a memory-bound
//                                              Adam phase, an idle gap); completions carry stream 7, device 0;
//                                              exits with CODE (default 0)
//   runtime_fake_job --noise SECONDS           1 ms kernels, each with a new name: nothing repeats
//   runtime_fake_job --step FILE STEPS         the step FILE describes: a line "period NS", then one line
//                                              "NAME START_OFFSET_NS DURATION_NS" per kernel (at default clocks)
//   runtime_fake_job --trace TRACE STEPS       the steps a gearshift trace recorded (`gearshift trace`), replayed
//                                              over and over as the job ran them: every launch at its CPU time,
//                                              every kernel, copy, memset and synchronize at its recorded times,
//                                              on its stream; STEPS steps in all
// FAKE_JOB_NO_COPIES=1: a plan's or a trace's copies and memsets are never sent (the feed before session 25).
// FAKE_JOB_TRUTH=FILE: kernel durations follow the clocks the simulated GPU has locked (read from its
// GEARSHIFT_SIMGPU_STATE file at each step's start), by a hidden truth: a line "ref SM_MHZ MEM_MHZ" (the clocks
// the step's durations are at) and per kernel "NAME A B": t(f, m) = t_ref·(A·f_ref/f + B·m_ref/m + 1 − A − B)
// (model/dvfs_model.hpp's law), or "NAME A B roofline": t(f, m) = t_ref·(max(A·f_ref/f, B·m_ref/m) + 1 − max(A, B)).
// Kernels not named are clock-independent; gaps between kernels stay as they are.
// FAKE_JOB_TAIL_S=X: after the last step, X seconds of --noise kernels (a job's evaluation or checkpoint save).
#include <signal.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <fcntl.h>
#include <sys/file.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <map>
#include <sstream>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "feed/protocol.hpp"
#include "trace/gearshift_format.hpp"
#include "trace/iteration.hpp"
#include "feed/socket.hpp"
#include "plan/plan_file.hpp"
#include "runtime/live.hpp"

namespace {

using gearshift::runtime::monotonic_ns;

// After an "O" command the feed is off, as the injection library turns it off: nothing more is sent, the job
// runs on.
bool g_feed_off = false;
bool put(int fd, const std::string& s) { return g_feed_off || gearshift::feed::write_all(fd, s); }

void sleep_until(std::int64_t t) {
  for (std::int64_t now; (now = monotonic_ns()) < t;) {
    timespec ts{static_cast<time_t>((t - now) / 1'000'000'000), static_cast<long>((t - now) % 1'000'000'000)};
    nanosleep(&ts, nullptr);
  }
}

struct Kernel {
  std::string name;
  std::int64_t start_offset_ns, duration_ns;
  int stream = -1;  // a plan position's stream: its completion line says it (-1: the step's completion_suffix)
};

// A copy or memset of the step (a plan position of kind memcpy/memset), sent as a Y line.
struct Copy {
  std::string name;
  std::int64_t start_offset_ns, duration_ns;
  bool memset;
  int stream;
};

struct Step {
  std::vector<Kernel> kernels;
  std::vector<Copy> copies;
  std::int64_t period_ns = 0;
  std::string completion_suffix;  // "" (the protocol's first form) or " <stream> <device>"
};

// The plan file's positions (plan/plan_file.hpp): its kernels, and its copies and memsets, each on its stream.
Step from_plan(const char* path) {
  gearshift::plan::PlanFile plan;
  try {
    plan = gearshift::plan::read_plan_file(path);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "runtime_fake_job: %s\n", e.what());
    std::exit(2);
  }
  Step s;
  for (const auto& p : plan.positions) {
    if (p.graph_launch >= 0) {  // a graph launch is one launch of many kernels: not what this job replays
      std::fprintf(stderr, "runtime_fake_job: %s holds CUDA graph launches; the stand-in replays eager steps only\n", path);
      std::exit(2);
    }
    const auto start = std::llround(p.start_offset_us * 1e3), duration = std::llround(p.duration_us * 1e3);
    const int stream = p.stream.value_or(-1);
    if (p.kind == gearshift::trace::OpKind::kernel)
      s.kernels.push_back({p.name, start, duration, stream});
    else if (std::getenv("FAKE_JOB_NO_COPIES") == nullptr)
      s.copies.push_back({p.name, start, duration, p.kind == gearshift::trace::OpKind::memset, std::max(stream, 0)});
  }
  s.period_ns = std::llround(plan.period_us * 1e3);
  return s;
}

Step from_step_file(const char* path) {
  std::ifstream in(path);
  Step s;
  std::string line;
  while (std::getline(in, line)) {
    std::istringstream ls(line);
    std::string name;
    std::int64_t a = 0, b = 0;
    if (!(ls >> name >> a)) continue;
    if (name == "period") {
      s.period_ns = a;
    } else if (ls >> b) {
      s.kernels.push_back({name, a, b});
    }
  }
  s.completion_suffix = " 7 0";
  return s;
}

struct Truth {
  double ref_sm = 0, ref_mem = 0;
  std::map<std::string, std::pair<double, double>> ab;  // name -> (A, B)
  std::map<std::string, bool> roofline;                 // name -> its law is the roofline
  std::string state;  // the simulated GPU's state file
};
Truth* g_truth = nullptr;

void load_truth() {
  const char* path = std::getenv("FAKE_JOB_TRUTH");
  const char* state = std::getenv("GEARSHIFT_SIMGPU_STATE");
  if (path == nullptr || state == nullptr) return;
  static Truth t;
  std::ifstream in(path);
  std::string line;
  while (std::getline(in, line)) {
    std::istringstream ls(line);
    std::string name;
    double a = 0, b = 0;
    if (!(ls >> name >> a >> b)) continue;
    std::string law;
    ls >> law;
    if (name == "ref") t.ref_sm = a, t.ref_mem = b;
    else t.ab[name] = {a, b}, t.roofline[name] = law == "roofline";
  }
  t.state = state;
  g_truth = &t;
}

// The GPU's locked clocks now (the reference clocks where none is locked).
void locked_clocks(double& sm, double& mem) {
  sm = g_truth->ref_sm, mem = g_truth->ref_mem;
  const int fd = ::open(g_truth->state.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return;
  flock(fd, LOCK_SH);
  std::string text;
  char buf[4096];
  for (ssize_t n; (n = ::read(fd, buf, sizeof buf)) > 0;) text.append(buf, static_cast<std::size_t>(n));
  flock(fd, LOCK_UN);
  ::close(fd);
  std::istringstream in(text);
  unsigned lo = 0, hi = 0;
  while (std::getline(in, text)) {
    if (text.rfind("gpu0.sm_lock=", 0) == 0 && std::sscanf(text.c_str() + 13, "%u %u", &lo, &hi) == 2 && hi > 0) sm = hi;
    if (text.rfind("gpu0.mem_lock=", 0) == 0 && std::sscanf(text.c_str() + 14, "%u %u", &lo, &hi) == 2 && hi > 0) mem = hi;
  }
}

// `step` at the GPU's locked clocks by the truth: each kernel stretched, the gaps between kernels kept.
Step at_clocks(const Step& step) {
  if (g_truth == nullptr) return step;
  double f = 0, m = 0;
  locked_clocks(f, m);
  Step out = step;
  std::int64_t shift = 0, prev_end = 0;
  for (std::size_t i = 0; i < step.kernels.size(); ++i) {
    const auto& k = step.kernels[i];
    double a = 0, b = 0;
    if (auto it = g_truth->ab.find(k.name); it != g_truth->ab.end()) a = it->second.first, b = it->second.second;
    const double sm = a * g_truth->ref_sm / f, mem = b * g_truth->ref_mem / m;
    const double r = g_truth->roofline[k.name] ? std::max(sm, mem) + 1 - std::max(a, b) : sm + mem + 1 - a - b;
    auto& o = out.kernels[i];
    o.start_offset_ns = k.start_offset_ns + shift;
    o.duration_ns = static_cast<std::int64_t>(static_cast<double>(k.duration_ns) * r);
    shift += o.duration_ns - k.duration_ns;
    prev_end = o.start_offset_ns + o.duration_ns;
  }
  out.period_ns = std::max(step.period_ns + shift, prev_end);
  return out;
}

// Kernel names as PyTorch on an H200 shows them, so that the model classifies them (GEMMs compute-bound,
// elementwise and Adam memory-bound).
Step synthetic() {
  Step s;
  std::int64_t t = 0;
  auto k = [&](const std::string& name, std::int64_t us) {
    s.kernels.push_back({name, t, us * 1000});
    t += us * 1000 + 10'000;  // 10 µs launch gap
  };
  for (int layer = 0; layer < 6; ++layer) {
    k("ampere_bf16_s16816gemm_bf16_128x128_ldg8_f2f_tn_qkv", 400);
    k("flash_fwd_kernel", 300);
    k("ampere_bf16_s16816gemm_bf16_64x64_ldg8_f2f_tn_proj", 200);
    k("layer_norm_kernel", 80);
    k("ampere_bf16_s16816gemm_bf16_256x128_ldg8_f2f_tn_fc1", 500);
    k("vectorized_elementwise_kernel<gelu>", 120);
    k("ampere_bf16_s16816gemm_bf16_128x256_ldg8_f2f_tn_fc2", 500);
  }
  k("cross_entropy_loss_kernel", 200);
  for (int layer = 0; layer < 6; ++layer) {
    k("ampere_bf16_s16816gemm_bf16_128x128_ldg8_f2f_nt_dgrad", 900);
    k("ampere_bf16_s16816gemm_bf16_128x128_ldg8_f2f_nn_wgrad", 900);
    k("flash_bwd_kernel", 600);
    k("vectorized_elementwise_kernel<gelu_backward>", 200);
    k("layer_norm_backward_kernel", 150);
  }
  for (int i = 0; i < 40; ++i) k("multi_tensor_apply_kernel<AdamFunctor>", 400);
  s.period_ns = t + 6'000'000;  // the data loader's idle gap before the next step
  s.completion_suffix = " 7 0";
  return s;
}

// Launches each step ahead of the GPU (as a CPU does), then reports completions as the simulated GPU ends them,
// and synchronizes at the step's end (an S line: entered after the launches, returned with the last kernel)
// unless FAKE_JOB_NO_SYNC=1. Returns false when the feed broke.
// FAKE_JOB_CONTROL_LOG=FILE: appends the control commands that arrived on the feed's connection to FILE after
// each step, as the injection library would read them (an "O" turns the feed off: see put()).
// Stream markers as the injection library sends them: with GEARSHIFT_FEED_MARKER_US > 0 (or an "M <us>"
// command), an M line after the first kernel that ends at least that long after the last marker.
std::int64_t g_marker_ns = -1;
// Whether every kernel's activity is recorded (GEARSHIFT_FEED_ACTIVITY_PERIOD_MS unset or 0, or an "A 0 0"
// command): FAKE_JOB_TRACED_GAP_US=X then slows the launching thread by X µs per kernel, as CUPTI's recording
// does to a launch-bound job (the kernels start that much later, one after the other; their durations stay);
// FAKE_JOB_TRACED_SCALE=F stretches the whole step, kernels included, by F while traced (a trace whose kernel
// times are not the job's).
bool g_traced = true;

int g_feed = -1;

void log_control() {
  static const char* path = std::getenv("FAKE_JOB_CONTROL_LOG");
  char buf[256];
  for (ssize_t n; (n = recv(g_feed, buf, sizeof buf, MSG_DONTWAIT)) > 0;) {
    const std::string got(buf, static_cast<std::size_t>(n));
    if (auto m = got.rfind("M "); m != std::string::npos && (m == 0 || got[m - 1] == '\n'))
      g_marker_ns = std::atoll(got.c_str() + m + 2) * 1000;
    if (auto a = got.rfind("A "); a != std::string::npos && (a == 0 || got[a - 1] == '\n'))
      g_traced = std::atoll(got.c_str() + a + 2) == 0;
    if (!g_feed_off && (got.starts_with("O\n") || got.find("\nO\n") != std::string::npos)) {
      g_feed_off = true;
      shutdown(g_feed, SHUT_WR);  // as the injection library closes its side once CUPTI is off
    }
    if (path == nullptr) continue;
    if (FILE* f = std::fopen(path, "a")) {
      std::fwrite(buf, 1, static_cast<std::size_t>(n), f);
      std::fclose(f);
    }
  }
}

// FAKE_JOB_INIT_KERNELS=N: first N launches of kernels outside the template, without a synchronize (a model's
// initialisation). FAKE_JOB_SYNC_DRIFT_US=D: step s's synchronize returns at offset s*D (mod the step) of it: a
// job whose own loop does not repeat with the kernel step. FAKE_JOB_UNNAMED=N: the first N kernels of each step
// complete without a launch line (a launch path the feed does not name). FAKE_JOB_GRAPH=1: all of a step's kernels
// but the last run from one CUDA graph launch (torch.compile's reduce-overhead): one L line "cudaGraphLaunch
// graph=1", their C lines carry its correlation and their names' ids (N lines, sent once), as the injection
// library writes them.
// FAKE_JOB_VARIANT=K:N:AFTER: every K-th step (s % K == K - 1) launches N more kernels "clip_scale_kernel" (20 µs each, 2 µs
// apart) after kernel AFTER, the rest of the step later by as much (Megatron-LM's gradient clipping, run only in
// the steps whose gradient norm exceeds the clip: a step variant, trace/step_variants.hpp).
// FAKE_JOB_COPIES=N: after each step's synchronize, N copies of 300 µs (10 µs apart) in its idle gap, sent as Y
// lines while every kernel's activity is recorded.
Step with_block(const Step& step, std::size_t after, long n) {
  constexpr std::int64_t kDur = 20'000, kEach = 22'000;
  Step out = step;
  if (after >= step.kernels.size()) return out;
  out.kernels.resize(after + 1);
  const std::int64_t from = step.kernels[after].start_offset_ns + step.kernels[after].duration_ns + 2'000;
  for (long i = 0; i < n; ++i) out.kernels.push_back({"clip_scale_kernel", from + i * kEach, kDur});
  for (std::size_t i = after + 1; i < step.kernels.size(); ++i) {
    Kernel k = step.kernels[i];
    k.start_offset_ns += n * kEach;
    out.kernels.push_back(k);
  }
  out.period_ns += n * kEach;
  return out;
}

bool run_noise(int fd, double seconds, std::int64_t first_corr);

bool run_steps(int fd, const Step& step_in, long steps) {
  const bool sync = std::getenv("FAKE_JOB_NO_SYNC") == nullptr;
  // FAKE_JOB_SYNCS_CYCLE=N: step s calls 1 + s % N synchronizes (the others right after the first, 1 µs each):
  // steps that disagree on their synchronizes, which the template then does not place.
  const long syncs_cycle = std::getenv("FAKE_JOB_SYNCS_CYCLE") ? std::atol(std::getenv("FAKE_JOB_SYNCS_CYCLE")) : 0;
  if (const char* m = std::getenv("GEARSHIFT_FEED_MARKER_US")) g_marker_ns = std::atoll(m) * 1000;
  if (const char* a = std::getenv("GEARSHIFT_FEED_ACTIVITY_PERIOD_MS")) g_traced = std::atoll(a) == 0;
  const std::int64_t traced_gap_ns =
      std::getenv("FAKE_JOB_TRACED_GAP_US") ? std::atoll(std::getenv("FAKE_JOB_TRACED_GAP_US")) * 1000 : 0;
  const double traced_scale = std::getenv("FAKE_JOB_TRACED_SCALE") ? std::atof(std::getenv("FAKE_JOB_TRACED_SCALE")) : 1;
  // FAKE_JOB_UNTRACED_SLOW=N:X: the first N steps after recording stops are X µs per kernel slower (the job's own
  // slow stretch, not recording's).
  long slow_steps = 0;
  std::int64_t slow_gap_ns = 0;
  if (const char* v = std::getenv("FAKE_JOB_UNTRACED_SLOW"); v != nullptr && std::strchr(v, ':') != nullptr)
    slow_steps = std::atol(v), slow_gap_ns = std::atoll(std::strchr(v, ':') + 1) * 1000;
  long untraced_steps = 0;
  // FAKE_JOB_COMPLETION_SHIFT_US=X: while not every kernel is recorded, completions say each kernel ran X µs later
  // than its markers and synchronizes do: the runtime's changes then land at other kernels than planned, as when
  // they land late (its in-time guard falls back; the scheduler, anchored by markers and synchronizes, is not
  // misled). A deterministic stand-in for a live job whose changes miss.
  const std::int64_t completion_shift_ns =
      std::getenv("FAKE_JOB_COMPLETION_SHIFT_US") ? std::atoll(std::getenv("FAKE_JOB_COMPLETION_SHIFT_US")) * 1000 : 0;
  // FAKE_JOB_LAUNCH_BOUND=1: each kernel is launched 5 µs before it starts (a launch-bound job), not all of a
  // step's kernels at its start.
  const bool launch_bound = std::getenv("FAKE_JOB_LAUNCH_BOUND") != nullptr;
  std::int64_t corr = 0, last_marker = 0;
  const long init = std::getenv("FAKE_JOB_INIT_KERNELS") ? std::atol(std::getenv("FAKE_JOB_INIT_KERNELS")) : 0;
  const long unnamed = std::getenv("FAKE_JOB_UNNAMED") ? std::atol(std::getenv("FAKE_JOB_UNNAMED")) : 0;
  const std::int64_t drift_ns =
      std::getenv("FAKE_JOB_SYNC_DRIFT_US") ? std::atoll(std::getenv("FAKE_JOB_SYNC_DRIFT_US")) * 1000 : 0;
  load_truth();
  const bool graph = std::getenv("FAKE_JOB_GRAPH") != nullptr;
  const long copies = std::getenv("FAKE_JOB_COPIES") ? std::atol(std::getenv("FAKE_JOB_COPIES")) : 0;
  std::map<std::string, std::int64_t> name_ids;
  if (graph) {
    std::string names;
    for (const Kernel& k : step_in.kernels)
      if (name_ids.emplace(k.name, static_cast<std::int64_t>(name_ids.size())).second)
        gearshift::feed::append_name_line(names, name_ids[k.name], k.name);
    if (!put(fd, names)) return false;
  }
  const std::size_t graph_kernels = graph && !step_in.kernels.empty() ? step_in.kernels.size() - 1 : 0;
  // FAKE_JOB_START_DELAY_MS=X: X ms before the first launch, init kernels included (a job's start-up: Megatron-LM
  // builds its model and data for ~35 s before its first iteration).
  if (const char* d = std::getenv("FAKE_JOB_START_DELAY_MS")) sleep_until(monotonic_ns() + std::atoll(d) * 1'000'000);
  for (long i = 0; i < init; ++i)
    if (!put(fd, "L " + std::to_string(monotonic_ns()) + " " + std::to_string(corr++) + " init_kernel_" +
                     std::to_string(i % 7) + "\n"))
      return false;
  const Step& given = step_in;
  // FAKE_JOB_SLOW_EVERY=N:US: every N-th step waits US µs more after its kernels (a logging iteration's CPU work,
  // Megatron-LM's every --log-interval): the job's own cycle of slow steps.
  long slow_every = 0, slow_every_us = 0;
  if (const char* v = std::getenv("FAKE_JOB_SLOW_EVERY")) std::sscanf(v, "%ld:%ld", &slow_every, &slow_every_us);
  long variant_every = 0, variant_kernels = 0, variant_after = 0;
  if (const char* v = std::getenv("FAKE_JOB_VARIANT"))
    std::sscanf(v, "%ld:%ld:%ld", &variant_every, &variant_kernels, &variant_after);
  for (long s = 0; steps < 0 || s < steps; ++s) {
    const Step step = variant_every > 0 && s % variant_every == variant_every - 1
                          ? with_block(at_clocks(given), static_cast<std::size_t>(variant_after), variant_kernels)
                          : at_clocks(given);
    const std::int64_t t0 = monotonic_ns();
    const std::int64_t first = corr;
    const std::int64_t slow = g_traced ? traced_gap_ns : ++untraced_steps <= slow_steps ? slow_gap_ns : 0;  // per kernel
    const std::int64_t shown_late = g_traced ? 0 : completion_shift_ns;
    const double scale = g_traced ? traced_scale : 1;
    auto scaled = [scale](std::int64_t ns) { return static_cast<std::int64_t>(static_cast<double>(ns) * scale); };
    auto launch = [&](std::size_t i) {
      if (i < graph_kernels)
        return i > 0 || put(fd, "L " + std::to_string(monotonic_ns()) + " " + std::to_string(first) +
                                    " cudaGraphLaunch graph=1\n");
      return static_cast<long>(i) < unnamed || put(fd, "L " + std::to_string(monotonic_ns()) + " " +
                                                           std::to_string(first + static_cast<std::int64_t>(i)) + " " +
                                                           step.kernels[i].name + "\n");
    };
    if (!launch_bound)
      for (std::size_t i = 0; i < step.kernels.size(); ++i)
        if (!launch(i)) return false;
    corr += static_cast<std::int64_t>(step.kernels.size());
    const std::int64_t entered = monotonic_ns();
    for (std::size_t i = 0; i < step.kernels.size(); ++i) {
      const auto start = t0 + scaled(step.kernels[i].start_offset_ns) + slow * static_cast<std::int64_t>(i + 1);
      const auto end = start + scaled(step.kernels[i].duration_ns);
      if (launch_bound) {  // the CPU launches each kernel just before the GPU starts it
        sleep_until(start - 5'000);
        if (!launch(i)) return false;
      }
      sleep_until(end);
      const bool in_graph = i < graph_kernels;
      const std::string suffix = !in_graph ? (step.kernels[i].stream >= 0
                                                   ? " " + std::to_string(step.kernels[i].stream) + " 0"
                                                   : step.completion_suffix)
                                 : step.completion_suffix.empty()
                                     ? " 0 0 " + std::to_string(name_ids[step.kernels[i].name])
                                     : step.completion_suffix + " " + std::to_string(name_ids[step.kernels[i].name]);
      if (!put(fd, "C " + std::to_string(in_graph ? first : first + static_cast<std::int64_t>(i)) + " " +
                       std::to_string(start + shown_late) + " " + std::to_string(end + shown_late) + suffix + "\n"))
        return false;
      if (g_marker_ns > 0 && end >= last_marker + g_marker_ns) {
        last_marker = end;
        if (!put(fd, "M " + std::to_string(first + static_cast<std::int64_t>(i)) + " " + std::to_string(end) + " " +
                         std::to_string(end) + "\n"))
          return false;
      }
    }
    if (sync && !step.kernels.empty()) {
      const std::int64_t n = static_cast<std::int64_t>(step.kernels.size());
      std::int64_t returned =
          std::max(entered, t0 + scaled(step.kernels.back().start_offset_ns + step.kernels.back().duration_ns) + slow * n);
      if (drift_ns > 0) returned = std::max(entered, t0 + (s * drift_ns) % step.period_ns);
      if (!put(fd, "S " + std::to_string(corr++) + " " + std::to_string(entered) + " " + std::to_string(returned) + "\n"))
        return false;
      for (long extra = 0; syncs_cycle > 1 && extra < s % syncs_cycle; ++extra)  // a logging step's .item() calls
        if (!put(fd, "S " + std::to_string(corr++) + " " + std::to_string(returned + 1'000 * (2 * extra + 1)) + " " +
                         std::to_string(returned + 1'000 * (2 * extra + 2)) + "\n"))
          return false;
    }
    // Copies in the idle gap after the step's synchronize (the next batch's host-to-device copy): Y lines, sent
    // as the injection library sends them, only while every kernel's activity is recorded.
    const std::int64_t step_end = step.kernels.empty() ? t0 : t0 + scaled(step.kernels.back().start_offset_ns +
                                                                           step.kernels.back().duration_ns);
    for (long c = 0; c < copies; ++c) {
      const std::int64_t start = step_end + slow * static_cast<std::int64_t>(step.kernels.size()) + 20'000 + c * 310'000;
      sleep_until(start + 300'000);
      std::string line;
      gearshift::feed::append_copy_line(line, corr++, start, start + 300'000, 7, 0, 8'388'608, false,
                                        "Memcpy HtoD (Pinned -> Device)");
      if (g_traced && !put(fd, line)) return false;
    }
    // The plan's own copies and memsets (a plan of a traced job), sent after its kernels as CUPTI's buffer
    // thread would, with their times in the step; one that ends after the step's last kernel is sent at its end.
    // They keep the plan's times: the options that move the kernels (FAKE_JOB_TRUTH, _VARIANT, _TRACED_GAP_US,
    // _UNTRACED_SLOW) leave them where they are.
    for (const Copy& c : step.copies) {
      const std::int64_t start = t0 + scaled(c.start_offset_ns), end = start + scaled(c.duration_ns);
      sleep_until(std::min(end, t0 + scaled(step.period_ns)));
      std::string line;
      gearshift::feed::append_copy_line(line, corr++, start, end, static_cast<std::uint32_t>(c.stream), 0, 0, c.memset,
                                        c.name);
      if (g_traced && !put(fd, line)) return false;
    }
    log_control();
    const std::int64_t logging_ns = slow_every > 0 && s % slow_every == slow_every - 1 ? slow_every_us * 1000 : 0;
    sleep_until(t0 + scaled(step.period_ns) + slow * static_cast<std::int64_t>(step.kernels.size()) + logging_ns);
  }
  // FAKE_JOB_TAIL_S=X: X seconds of kernels outside the step after the last one (an evaluation, a checkpoint).
  if (const char* t = std::getenv("FAKE_JOB_TAIL_S")) return run_noise(fd, std::atof(t), corr);
  return true;
}

// One feed line of a recorded step, `at` ns after its replay's base (what each kind sends: run_recorded).
struct Recorded {
  enum Kind : std::uint8_t { launch, kernel_end, copy_end, sync_return } kind;
  std::int64_t at;
  std::size_t index;  // into the trace's ops (launch, kernel_end, copy_end) or syncs (sync_return)
};

// The trace's detected steps, first to last, as one block of feed lines relative to the first step's GPU start
// (launches before it are at negative times), the block's length (the steps' mean period times their count) and
// its steps.
std::vector<Recorded> recorded_block(const gearshift::trace::Trace& t, std::int64_t& span_ns, std::int64_t& lead_ns,
                                     long& steps) {
  const auto a = gearshift::trace::detect_iterations(t);
  const auto& its = a.iterations;
  steps = static_cast<long>(its.size());
  const std::int64_t s0 = its.front().start_ns;
  const std::int64_t period = its.size() > 1 ? (its.back().start_ns - s0) / static_cast<std::int64_t>(its.size() - 1)
                                             : its.front().end_ns - s0;
  span_ns = period * static_cast<std::int64_t>(its.size());
  std::vector<Recorded> out;
  std::int64_t first_launch = s0;
  for (std::size_t i = 0; i < t.ops.size(); ++i) {
    const auto& op = t.ops[i];
    if (op.start_ns < s0 || op.start_ns >= s0 + span_ns || op.device != t.ops.front().device) continue;
    if (op.graph_id != 0) {  // a graph launch is one launch of many kernels: not what this job replays
      std::fprintf(stderr, "runtime_fake_job: the trace holds CUDA graph launches; the stand-in replays eager steps only\n");
      std::exit(2);
    }
    if (op.kind != gearshift::trace::OpKind::kernel) {
      out.push_back({Recorded::copy_end, op.end_ns() - s0, i});
      continue;
    }
    const std::int64_t launch = op.launch_ns >= 0 ? op.launch_ns : op.start_ns - 5'000;
    first_launch = std::min(first_launch, launch);
    out.push_back({Recorded::launch, launch - s0, i});
    out.push_back({Recorded::kernel_end, op.end_ns() - s0, i});
  }
  for (std::size_t i = 0; i < t.syncs.size(); ++i) {
    const auto& y = t.syncs[i];
    if (y.enter_ns >= first_launch && y.enter_ns < first_launch + span_ns && y.correlation >= 0)
      out.push_back({Recorded::sync_return, y.exit_ns() - s0, i});
  }
  lead_ns = s0 - first_launch;
  std::stable_sort(out.begin(), out.end(), [](const Recorded& x, const Recorded& y) { return x.at < y.at; });
  return out;
}

// Replays the trace's steps (recorded_block) block after block until `steps` steps ran: L lines at the launches'
// CPU times, C lines as kernels end (their stream and device), Y lines as copies end (while every kernel is
// recorded), S lines as synchronizes return; correlations the trace's, raised by a block's worth each time so that
// they keep increasing in launch order. The GPU does not slow at other clocks: no FAKE_JOB_TRUTH here.
bool run_recorded(int fd, const char* path, long steps) {
  using gearshift::trace::Trace;
  Trace t;
  std::int64_t span = 0, lead = 0;
  std::vector<Recorded> block;
  long per_block = 0;
  try {  // a trace that does not load, or holds no steps: said, exit 2
    t = gearshift::trace::import_trace(path);
    block = recorded_block(t, span, lead, per_block);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "runtime_fake_job: %s: %s\n", path, e.what());
    std::exit(2);
  }
  std::int64_t corr_step = 1;
  for (const auto& op : t.ops) corr_step = std::max(corr_step, op.correlation + 1);
  for (const auto& y : t.syncs) corr_step = std::max(corr_step, y.correlation + 1);
  const bool copies = std::getenv("FAKE_JOB_NO_COPIES") == nullptr;
  if (const char* m = std::getenv("GEARSHIFT_FEED_MARKER_US")) g_marker_ns = std::atoll(m) * 1000;
  if (const char* a = std::getenv("GEARSHIFT_FEED_ACTIVITY_PERIOD_MS")) g_traced = std::atoll(a) == 0;
  const std::int64_t s0 = monotonic_ns() + lead + 1'000'000;
  std::int64_t last_marker = 0, next_control = 0;
  std::string pending;
  const long blocks = (steps + per_block - 1) / per_block;
  // Block b's lines at s0 + b·span + at; a block's early launches run while the previous block's GPU work ends.
  std::vector<std::pair<std::int64_t, const Recorded*>> timeline;
  for (long b = 0; b < blocks; ++b)
    for (const Recorded& r : block) timeline.push_back({b * span + r.at, &r});
  std::stable_sort(timeline.begin(), timeline.end(),
                   [](const auto& x, const auto& y) { return x.first < y.first; });
  for (const auto& [rel, r] : timeline) {
    const std::int64_t base = s0 + (rel - r->at);              // this block's base: s0 + b·span
    const std::int64_t shift = (rel - r->at) / span * corr_step;  // b·corr_step
    if (s0 + rel > monotonic_ns() + 100'000) {  // lines due now go out together: one write, not one per line
      if (!put(fd, pending)) return false;
      pending.clear();
      sleep_until(s0 + rel);
    }
    std::string line;
    switch (r->kind) {
      case Recorded::launch: {
        const auto& op = t.ops[r->index];
        // Stamped with its recorded CPU time, as the injection library stamps a launch when its callback runs (the
        // line itself may leave a little later, with the others due).
        line = "L " + std::to_string(s0 + rel) + " " + std::to_string(op.correlation + shift) + " " +
               t.names[op.name_id] + "\n";
        break;
      }
      case Recorded::kernel_end: {
        const auto& op = t.ops[r->index];
        const std::int64_t end = base + r->at, start = end - op.duration_ns;
        line = "C " + std::to_string(op.correlation + shift) + " " + std::to_string(start) + " " + std::to_string(end) +
               " " + std::to_string(op.stream) + " " + std::to_string(op.device) + "\n";
        if (g_marker_ns > 0 && end >= last_marker + g_marker_ns) {
          last_marker = end;
          line += "M " + std::to_string(op.correlation + shift) + " " + std::to_string(last_marker) + " " +
                  std::to_string(last_marker) + "\n";
        }
        break;
      }
      case Recorded::copy_end: {
        const auto& op = t.ops[r->index];
        if (!copies || !g_traced) continue;
        const std::int64_t end = base + r->at;
        gearshift::feed::append_copy_line(line, op.correlation + shift, end - op.duration_ns, end,
                                          static_cast<std::uint32_t>(op.stream), static_cast<std::uint32_t>(op.device),
                                          op.bytes, op.kind == gearshift::trace::OpKind::memset, t.names[op.name_id]);
        break;
      }
      case Recorded::sync_return: {
        const auto& y = t.syncs[r->index];
        const std::int64_t ret = base + r->at;
        line = "S " + std::to_string(y.correlation + shift) + " " + std::to_string(ret - y.duration_ns) + " " +
               std::to_string(ret) + "\n";
        break;
      }
    }
    pending += line;
    if (monotonic_ns() >= next_control) {
      log_control();
      next_control = monotonic_ns() + 10'000'000;
    }
  }
  return put(fd, pending);
}

bool run_noise(int fd, double seconds, std::int64_t first_corr) {
  const std::int64_t until = monotonic_ns() + static_cast<std::int64_t>(seconds * 1e9);
  // FAKE_JOB_NOISE_US: each kernel's length (default 1000 µs); short ones make a launch-bound job's rate.
  const char* us = std::getenv("FAKE_JOB_NOISE_US");
  const std::int64_t len = us ? std::max<std::int64_t>(1, std::atoll(us)) * 1000 : 1'000'000;
  for (std::int64_t corr = first_corr; monotonic_ns() < until; ++corr) {
    const std::int64_t start = monotonic_ns();
    const std::string c = std::to_string(corr);
    if (!put(fd, "L " + std::to_string(start) + " " + c + " noise_kernel_" + c + "\n")) return false;
    sleep_until(start + len);
    if (!put(fd, "C " + c + " " + std::to_string(start) + " " + std::to_string(start + len) + "\n")) return false;
  }
  return true;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 3) return 2;
  signal(SIGPIPE, SIG_IGN);
  const char* path = std::getenv(gearshift::feed::kEnvSocket);
  if (!path) return 3;
  std::string why;
  const int fd = gearshift::feed::connect_socket(path, 1000, &why);
  if (fd < 0) {
    std::fprintf(stderr, "runtime_fake_job: %s\n", why.c_str());
    return 3;
  }
  g_feed = fd;
  std::string hello;
  gearshift::feed::append_hello_line(hello, gearshift::feed::hello_from_env(getpid(), [](const char* k) {
    return std::getenv(k);
  }));
  if (!put(fd, hello)) return 3;
  if (std::strcmp(argv[1], "--noise") == 0) {
    run_noise(fd, std::atof(argv[2]), 0);
    return 0;
  }
  if (std::strcmp(argv[1], "--step") == 0) {
    if (argc < 4) return 2;
    run_steps(fd, from_step_file(argv[2]), std::atol(argv[3]));
    return 0;
  }
  if (std::strcmp(argv[1], "--trace") == 0) {
    if (argc < 4) return 2;
    run_recorded(fd, argv[2], std::atol(argv[3]));
    return 0;
  }
  if (std::strcmp(argv[1], "--synthetic") == 0) {
    run_steps(fd, synthetic(), std::atol(argv[2]));
    return argc > 3 ? std::atoi(argv[3]) : 0;
  }
  if (argc > 3) {
    FILE* f = std::fopen(argv[3], "w");
    if (!f) return 4;
    std::fprintf(f, "%d\n", static_cast<int>(getpid()));
    std::fclose(f);
  }
  run_steps(fd, from_plan(argv[1]), std::atol(argv[2]));
  return 0;
}
