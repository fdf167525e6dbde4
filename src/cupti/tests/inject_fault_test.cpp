// The injection library end to end, in a child process per case, against the fake CUPTI (fake_cupti.cpp):
// faults leave the program running with one warning line; a working CUPTI yields a complete trace.
#include <dlfcn.h>
#include <fcntl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <chrono>
#include <functional>
#include <set>
#include <sstream>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include <cupti.h>

#include "feed/socket.hpp"
#include "trace/gearshift_format.hpp"

namespace fs = std::filesystem;

namespace {

struct ChildResult {
  int exit_code = -1;
  std::string stderr_text;
};

// A forked child running `body`, its stderr to a file. Fork it before the test starts any thread of its own:
// ThreadSanitizer does not support a fork from a multi-threaded process ("starting new threads after
// multi-threaded fork is not supported"), and the child would inherit a copy of a running thread's locks.
struct Child {
  pid_t pid = -1;
  std::string err_path;
};

Child start_child(const std::function<int()>& body) {
  Child c;
  c.err_path = (fs::path(::testing::TempDir()) / ("inject_stderr_" + std::to_string(getpid()))).string();
  c.pid = fork();
  if (c.pid == 0) {
    int fd = open(c.err_path.c_str(), O_CREAT | O_TRUNC | O_WRONLY, 0644);
    dup2(fd, 2);
    int rc = 99;
    try {
      rc = body();
    } catch (...) {
    }
    std::fflush(nullptr);
    _exit(rc);
  }
  return c;
}

ChildResult wait_child(const Child& c) {
  int status = 0;
  waitpid(c.pid, &status, 0);
  ChildResult r;
  r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  std::ifstream f(c.err_path);
  std::stringstream ss;
  ss << f.rdbuf();
  r.stderr_text = ss.str();
  return r;
}

// Runs `body` in a forked child with stderr captured; the child's exit code is body's return value.
ChildResult in_child(const std::function<int()>& body) { return wait_child(start_child(body)); }

int count_lines(const std::string& s) {
  int n = 0;
  for (char c : s) n += c == '\n';
  return n;
}

// In the child: point the tracer at the fake CUPTI in `mode`, load the injection library, initialise it.
void* inject(const std::string& mode, const std::string& output, const char* sample_ms = "0") {
  setenv("FAKE_CUPTI_MODE", mode.c_str(), 1);
  setenv("GEARSHIFT_CUPTI_LIBRARY", GEARSHIFT_FAKE_CUPTI, 1);
  setenv("GEARSHIFT_TRACE_OUTPUT", output.c_str(), 1);
  setenv("GEARSHIFT_TRACE_SAMPLE_MS", sample_ms, 1);  // "0": no NVML in CI
  void* lib = dlopen(GEARSHIFT_INJECT_LIBRARY, RTLD_NOW | RTLD_LOCAL);
  if (lib == nullptr) return nullptr;
  auto init = reinterpret_cast<int (*)()>(dlsym(lib, "InitializeInjection"));
  if (init == nullptr || init() != 1) return nullptr;
  return lib;
}

// In the child: the library in `gearshift run`'s feed-only mode (no trace file) on the fake CUPTI, whose handle
// goes to `fake`. Returns 0, or the child's exit code for what failed (2: the library, 3: the fake's handle).
int start_feed_only(void*& fake) {
  void* lib = inject("ok", "");
  unsetenv("GEARSHIFT_TRACE_OUTPUT");
  if (lib == nullptr) return 2;
  fake = dlopen(GEARSHIFT_FAKE_CUPTI, RTLD_NOW | RTLD_NOLOAD);
  return fake == nullptr ? 3 : 0;
}

std::string read_to_end(int fd) {
  std::string all;
  char buf[4096];
  for (ssize_t n; (n = read(fd, buf, sizeof buf)) > 0;) all.append(buf, static_cast<std::size_t>(n));
  return all;
}

std::vector<std::string> lines_of(const std::string& s) {
  std::vector<std::string> out;
  std::stringstream ss(s);
  for (std::string l; std::getline(ss, l);) out.push_back(l);
  return out;
}

// Runs `body(write_fds)` in a child that holds the write ends of `n` pipes; returns the child's result and what
// each pipe carried (read after the child ended, so it holds everything written).
struct PipeRun {
  ChildResult child;
  std::vector<std::string> text;
};
PipeRun with_pipes(int n, const std::function<int(const std::vector<int>&)>& body) {
  std::vector<int> reads, writes;
  for (int i = 0; i < n; ++i) {
    int p[2];
    if (pipe(p) != 0) throw std::runtime_error("pipe failed");
    reads.push_back(p[0]);
    writes.push_back(p[1]);
  }
  ChildResult r = in_child([&] {
    for (int fd : reads) close(fd);
    int rc = body(writes);
    for (int fd : writes) close(fd);
    return rc;
  });
  for (int fd : writes) close(fd);
  PipeRun out{r, {}};
  for (int fd : reads) {
    out.text.push_back(read_to_end(fd));
    close(fd);
  }
  return out;
}

// Runs `body` in a child with GEARSHIFT_RUNTIME_SOCKET naming a listening socket (as `gearshift run` gives it);
// returns the child's result and what its connection carried, the hello line apart.
struct SocketRun {
  ChildResult child;
  std::string hello;
  std::string text;
  int connections = 0;
};
SocketRun with_socket(const std::function<int()>& body) {
  gearshift::feed::Listener l;
  ChildResult r = in_child([&] {
    setenv("GEARSHIFT_RUNTIME_SOCKET", l.path().c_str(), 1);
    return body();
  });
  SocketRun out{r, {}, {}, 0};
  for (int fd; (fd = l.accept_one()) >= 0;) {  // queued while the child ran; it has ended, so all is there
    ++out.connections;
    fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) & ~O_NONBLOCK);
    out.text += read_to_end(fd);
    close(fd);
  }
  const auto nl = out.text.find('\n');
  if (nl != std::string::npos && out.text.starts_with("H ")) {
    out.hello = out.text.substr(0, nl);
    out.text.erase(0, nl + 1);
  }
  return out;
}

std::string out_path(const std::string& name) {
  auto p = (fs::path(::testing::TempDir()) / ("inject_" + name + ".jsonl.gz")).string();
  fs::remove(p);
  return p;
}

}  // namespace

TEST(Injection, MissingCuptiWarnsOnceAndWritesNothing) {
  std::string out = out_path("missing");
  auto r = in_child([&] {
    setenv("GEARSHIFT_TRACE_OUTPUT", out.c_str(), 1);
    setenv("GEARSHIFT_CUPTI_LIBRARY", "/nonexistent/libcupti.so.13", 1);
    void* lib = dlopen(GEARSHIFT_INJECT_LIBRARY, RTLD_NOW | RTLD_LOCAL);
    auto init = reinterpret_cast<int (*)()>(dlsym(lib, "InitializeInjection"));
    return init() == 1 ? 0 : 1;
  });
  EXPECT_EQ(r.exit_code, 0);
  EXPECT_EQ(count_lines(r.stderr_text), 1) << r.stderr_text;
  EXPECT_NE(r.stderr_text.find("CUPTI unavailable"), std::string::npos) << r.stderr_text;
  EXPECT_NE(r.stderr_text.find("runs on untraced"), std::string::npos);
  EXPECT_FALSE(fs::exists(out));
}

TEST(Injection, SecondSubscriberWarnsOnceAndWritesNothing) {
  std::string out = out_path("multiple");
  auto r = in_child([&] { return inject("multiple", out) != nullptr ? 0 : 1; });
  EXPECT_EQ(r.exit_code, 0);
  EXPECT_EQ(count_lines(r.stderr_text), 1) << r.stderr_text;
  EXPECT_NE(r.stderr_text.find("another CUPTI client"), std::string::npos) << r.stderr_text;
  EXPECT_FALSE(fs::exists(out));
}

TEST(Injection, OldCuptiIsRefused) {
  std::string out = out_path("old");
  auto r = in_child([&] { return inject("old", out) != nullptr ? 0 : 1; });
  EXPECT_EQ(r.exit_code, 0);
  EXPECT_EQ(count_lines(r.stderr_text), 1) << r.stderr_text;
  EXPECT_NE(r.stderr_text.find("older than"), std::string::npos) << r.stderr_text;
}

TEST(Injection, UnwritableOutputWarnsOnce) {
  auto r = in_child([&] { return inject("ok", "/nonexistent-dir/t.jsonl.gz") != nullptr ? 0 : 1; });
  EXPECT_EQ(r.exit_code, 0);
  EXPECT_EQ(count_lines(r.stderr_text), 1) << r.stderr_text;
  EXPECT_NE(r.stderr_text.find("cannot write the trace"), std::string::npos) << r.stderr_text;
}

TEST(Injection, TracesLaunchesAndRecordsThroughFakeCupti) {
  std::string out = out_path("ok");
  auto r = in_child([&] {
    void* lib = inject("ok", out);
    if (lib == nullptr) return 2;
    void* fake = dlopen(GEARSHIFT_FAKE_CUPTI, RTLD_NOW | RTLD_NOLOAD);
    if (fake == nullptr) return 3;
    auto launch = reinterpret_cast<void (*)(uint32_t, uint32_t)>(dlsym(fake, "fake_cupti_launch"));
    auto kernel = reinterpret_cast<void (*)(const char*, uint64_t, uint64_t, uint32_t)>(dlsym(fake, "fake_cupti_add_kernel"));
    auto range = reinterpret_cast<void (*)(const char*, uint32_t, uint64_t, uint64_t)>(dlsym(fake, "fake_cupti_add_range"));
    auto enabled = reinterpret_cast<int (*)()>(dlsym(fake, "fake_cupti_enabled_callbacks"));
    if (enabled() != 16) return 4;  // the 8 launch callbacks and the 8 synchronize ones (the trace records them)
    for (uint32_t step = 0; step < 3; ++step) {
      range("gearshift.step", step + 1, 10'000 + step * 100'000, 90'000 + step * 100'000);
      for (uint32_t k = 0; k < 2; ++k) {
        uint32_t corr = step * 2 + k + 1;
        launch(CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel, corr);
        kernel(k == 0 ? "_Z4geluPf" : "_Z9layernormPfi", 20'000 + step * 100'000 + k * 30'000,
               40'000 + step * 100'000 + k * 30'000, corr);
      }
    }
    auto stop = reinterpret_cast<int (*)()>(dlsym(lib, "gearshift_trace_stop"));
    return stop() == 1 ? 0 : 5;
  });
  ASSERT_EQ(r.exit_code, 0) << r.stderr_text;
  EXPECT_NE(r.stderr_text.find("6 kernels"), std::string::npos) << r.stderr_text;
  auto tr = gearshift::trace::read_gearshift_trace(out);
  EXPECT_TRUE(tr.complete);
  ASSERT_EQ(tr.kernel_count(), 6u);
  EXPECT_EQ(tr.name_of(tr.ops[0]), "gelu(float*)");
  EXPECT_EQ(tr.ops[1].correlation, 2);
  EXPECT_EQ(tr.ops[1].block[0], 128);
  ASSERT_EQ(tr.markers.size(), 3u);
  EXPECT_EQ(tr.markers[2].duration_ns, 80'000);
  EXPECT_NE(tr.meta_json.find("fake_cupti"), std::string::npos);
}

// `gearshift run`'s mode: no trace file, the launch feed on a connection to the runtime's socket. The hello
// line names the process (pid, rank from RANK/LOCAL_RANK/WORLD_SIZE, CUDA_VISIBLE_DEVICES), launches arrive as L
// lines with demangled names, completed kernels as C lines after their launch; written at exit at the latest.
TEST(Injection, FeedOnlyModeWritesLaunchesAndCompletionsToTheSocket) {
  SocketRun run = with_socket([] {
    setenv("RANK", "3", 1);
    setenv("LOCAL_RANK", "1", 1);
    setenv("WORLD_SIZE", "4", 1);
    setenv("CUDA_VISIBLE_DEVICES", "2,3", 1);
    void* fake = nullptr;
    if (int rc = start_feed_only(fake)) return rc;
    auto launch = reinterpret_cast<void (*)(uint32_t, uint32_t, const char*)>(dlsym(fake, "fake_cupti_launch_named"));
    auto kernel = reinterpret_cast<void (*)(const char*, uint64_t, uint64_t, uint32_t)>(dlsym(fake, "fake_cupti_add_kernel"));
    for (uint32_t corr = 1; corr <= 4; ++corr) {
      launch(CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel, corr, corr % 2 ? "_Z4geluPf" : "_Z9layernormPfi");
      kernel(corr % 2 ? "_Z4geluPf" : "_Z9layernormPfi", 10'000'000 + corr * 1000, 10'000'500 + corr * 1000, corr);
    }
    std::exit(0);  // through the exit handler, as a program ends
  });
  const ChildResult& r = run.child;
  const std::string& all = run.text;
  ASSERT_EQ(r.exit_code, 0) << r.stderr_text;
  EXPECT_EQ(run.connections, 1);
  EXPECT_TRUE(run.hello.starts_with("H 1 ")) << run.hello;
  EXPECT_TRUE(run.hello.ends_with(" 3 1 4 =2,3")) << run.hello;
  std::vector<std::string> lines = lines_of(all);
  ASSERT_EQ(lines.size(), 8u) << all << r.stderr_text;
  int launches = 0, completions = 0;
  for (const auto& l : lines) {
    if (l.starts_with("L ")) {
      ++launches;
      EXPECT_TRUE(l.ends_with(launches % 2 ? " gelu(float*)" : " layernorm(float*, int)")) << l;
      EXPECT_EQ(completions, 0) << "a completion came before its launch";
    } else {
      ++completions;
      long corr = 0, start = 0, end = 0, stream = 0, device = -1;
      ASSERT_EQ(std::sscanf(l.c_str(), "C %ld %ld %ld %ld %ld", &corr, &start, &end, &stream, &device), 5) << l;
      EXPECT_EQ(corr, completions);
      EXPECT_EQ(end - start, 500);
      EXPECT_EQ(stream, 7);
    }
  }
  EXPECT_EQ(launches, 4);
  EXPECT_EQ(completions, 4);
  EXPECT_NE(r.stderr_text.find("runtime feed: 4 launches, 4 completed kernels"), std::string::npos) << r.stderr_text;
  EXPECT_EQ(r.stderr_text.find("warning"), std::string::npos) << r.stderr_text;
}

// `run --auto` gave up: the runtime's "O" turns the feed off in the job. The library's controller thread
// unsubscribes (no launch callback any more) and sends its last lines; launches after it reach nobody, and the
// job runs on.
TEST(Injection, TheRuntimesOffCommandUnsubscribesAndClosesTheFeed) {
  gearshift::feed::Listener l;
  std::string text;
  const Child child = start_child([&] {  // forked before the runtime's thread starts (start_child)
    setenv("GEARSHIFT_RUNTIME_SOCKET", l.path().c_str(), 1);
    void* fake = nullptr;
    if (int rc = start_feed_only(fake)) return rc;
    auto launch = reinterpret_cast<void (*)(uint32_t, uint32_t, const char*)>(dlsym(fake, "fake_cupti_launch_named"));
    auto subscribed = reinterpret_cast<int (*)()>(dlsym(fake, "fake_cupti_subscribed"));
    launch(CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel, 1, "_Z4geluPf");
    launch(CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel, 2, "_Z4geluPf");
    const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(15);
    while (subscribed() != 0 && std::chrono::steady_clock::now() < until)
      std::this_thread::sleep_for(std::chrono::milliseconds(2));
    if (subscribed() != 0) return 4;  // the command never took effect
    launch(CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel, 3, "_Z4geluPf");  // after the feed is off: nobody hears it
    std::exit(0);
  });
  std::thread runtime([&] {  // `gearshift run`'s side: after two launch lines, the feed off
    int fd = -1;
    const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(20);
    while ((fd = l.accept_one()) < 0 && std::chrono::steady_clock::now() < until)
      std::this_thread::sleep_for(std::chrono::milliseconds(2));
    if (fd < 0) return;
    fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) & ~O_NONBLOCK);
    char buf[4096];
    bool sent = false;
    for (ssize_t n; (n = read(fd, buf, sizeof buf)) > 0;) {
      text.append(buf, static_cast<std::size_t>(n));
      std::size_t launches = 0;
      for (std::size_t at = 0; (at = text.find("\nL ", at)) != std::string::npos; ++at) ++launches;
      if (!sent && launches >= 2) sent = write(fd, "O\n", 2) == 2;
    }
    close(fd);
  });
  const ChildResult r = wait_child(child);
  runtime.join();
  ASSERT_EQ(r.exit_code, 0) << r.stderr_text << text;
  std::size_t launches = 0;
  for (const auto& line : lines_of(text)) launches += line.starts_with("L ");
  EXPECT_EQ(launches, 2u) << text;
  EXPECT_NE(r.stderr_text.find("gearshift run turned the launch feed off; the program runs on untraced"),
            std::string::npos)
      << r.stderr_text;
  EXPECT_NE(r.stderr_text.find("runtime feed: 2 launches"), std::string::npos) << r.stderr_text;
}

// Stream markers through the library: with the process's driver (here the stand-in libcuda.so.1) the launch
// callback claims a launch at its entry, writes the marker at its exit, and the feed's writer sends an M line
// for it once the word holds its number, after the launch's L line.
TEST(Injection, FeedSendsStreamMarkersAfterTheirLaunches) {
  SocketRun run = with_socket([] {
    void* cuda = dlopen(GEARSHIFT_FAKE_CUDA, RTLD_NOW | RTLD_GLOBAL);
    if (cuda == nullptr) return 5;
    setenv("GEARSHIFT_FEED_MARKER_US", "1", 1);
    void* fake = nullptr;
    if (int rc = start_feed_only(fake)) return rc;
    auto launch = reinterpret_cast<void (*)(uint32_t, uint32_t, const char*)>(dlsym(fake, "fake_cupti_launch_named"));
    auto writes = reinterpret_cast<int (*)()>(dlsym(cuda, "fake_cuda_writes"));
    for (uint32_t corr = 1; corr <= 6; ++corr) {
      launch(CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel, corr, "_Z4geluPf");
      std::this_thread::sleep_for(std::chrono::milliseconds(5));  // the writer polls every 500 µs
    }
    if (writes() < 2) return 4;
    std::exit(0);
  });
  const ChildResult& r = run.child;
  ASSERT_EQ(r.exit_code, 0) << r.stderr_text;
  std::set<long> launched;
  int markers = 0;
  for (const auto& l : lines_of(run.text)) {
    if (l.starts_with("L ")) {
      long cpu = 0, corr = 0;
      ASSERT_EQ(std::sscanf(l.c_str(), "L %ld %ld", &cpu, &corr), 2) << l;
      launched.insert(corr);
    } else if (l.starts_with("M ")) {
      long corr = 0, not_before = 0, seen = 0;
      ASSERT_EQ(std::sscanf(l.c_str(), "M %ld %ld %ld", &corr, &not_before, &seen), 3) << l;
      EXPECT_TRUE(launched.count(corr)) << "marker before its launch: " << l;
      EXPECT_LE(not_before, seen) << l;
      ++markers;
    }
  }
  EXPECT_GE(markers, 2) << run.text;
  EXPECT_EQ(launched.size(), 6u);
  const std::string note = "stream markers (";
  EXPECT_NE(r.stderr_text.find(note), std::string::npos) << r.stderr_text;
  EXPECT_EQ(r.stderr_text.find("markers off"), std::string::npos) << r.stderr_text;
}

// A job whose steps are CUDA graph launches (torch.compile reduce-overhead) gets markers after them too: without,
// a compiled GPT-2 on an H200 saw 27 markers in 300 steps and fell back to every kernel's activity.
TEST(Injection, FeedSendsStreamMarkersAfterGraphLaunches) {
  SocketRun run = with_socket([] {
    void* cuda = dlopen(GEARSHIFT_FAKE_CUDA, RTLD_NOW | RTLD_GLOBAL);
    if (cuda == nullptr) return 5;
    setenv("GEARSHIFT_FEED_MARKER_US", "1", 1);
    void* fake = nullptr;
    if (int rc = start_feed_only(fake)) return rc;
    auto graph = reinterpret_cast<void (*)(uint32_t)>(dlsym(fake, "fake_cupti_graph_launch"));
    auto writes = reinterpret_cast<int (*)()>(dlsym(cuda, "fake_cuda_writes"));
    if (graph == nullptr || writes == nullptr) return 6;
    for (uint32_t corr = 1; corr <= 6; ++corr) {
      graph(corr);
      std::this_thread::sleep_for(std::chrono::milliseconds(5));  // the writer polls every 500 µs
    }
    if (writes() < 2) return 4;
    std::exit(0);
  });
  const ChildResult& r = run.child;
  ASSERT_EQ(r.exit_code, 0) << r.stderr_text << run.text;
  std::set<long> launched;
  int markers = 0;
  for (const auto& l : lines_of(run.text)) {
    long a = 0, corr = 0, c = 0;
    if (l.starts_with("L ")) {
      ASSERT_EQ(std::sscanf(l.c_str(), "L %ld %ld", &a, &corr), 2) << l;
      EXPECT_NE(l.find("cudaGraphLaunch graph="), std::string::npos) << l;
      launched.insert(corr);
    } else if (l.starts_with("M ")) {
      ASSERT_EQ(std::sscanf(l.c_str(), "M %ld %ld %ld", &corr, &a, &c), 3) << l;
      EXPECT_TRUE(launched.count(corr)) << "marker before its launch: " << l;
      ++markers;
    }
  }
  EXPECT_EQ(launched.size(), 6u) << run.text;
  EXPECT_GE(markers, 2) << run.text;
}

// A socket that is gone (`gearshift run` killed) costs one note; a trace file asked for is written all the same,
// and without one the program runs on after that note alone.
TEST(Injection, MissingRuntimeSocketIsOneNote) {
  std::string out = out_path("nosocket");
  auto r = in_child([&] {
    setenv("GEARSHIFT_RUNTIME_SOCKET", "/nonexistent/gearshift-run-x/feed.sock", 1);
    void* lib = inject("ok", out);
    return lib != nullptr ? 0 : 2;
  });
  EXPECT_EQ(r.exit_code, 0) << r.stderr_text;
  EXPECT_NE(r.stderr_text.find("no launch feed (GEARSHIFT_RUNTIME_SOCKET): /nonexistent/gearshift-run-x/feed.sock does "
                               "not exist"),
            std::string::npos)
      << r.stderr_text;
  EXPECT_EQ(r.stderr_text.find("warning"), std::string::npos) << r.stderr_text;
  auto feed_only = in_child([&] {
    setenv("GEARSHIFT_RUNTIME_SOCKET", "/nonexistent/gearshift-run-x/feed.sock", 1);
    void* lib = inject("ok", "");
    unsetenv("GEARSHIFT_TRACE_OUTPUT");
    return lib != nullptr ? 0 : 2;
  });
  EXPECT_EQ(feed_only.exit_code, 0) << feed_only.stderr_text;
  EXPECT_EQ(count_lines(feed_only.stderr_text), 1) << feed_only.stderr_text;
}

// --- gearshift_feed_attach / gearshift_feed_detach: the feed started on a running process (Python's enable()).

namespace {

struct Feed {
  int (*attach)(int) = nullptr;
  int (*detach)() = nullptr;
  const char* (*error)() = nullptr;
  void (*launch)(uint32_t, uint32_t, const char*) = nullptr;
  void (*kernel)(const char*, uint64_t, uint64_t, uint32_t) = nullptr;
  int (*enabled)() = nullptr;
  void (*sync)(uint32_t, int, int) = nullptr;
  void (*copy)(uint64_t, uint64_t, uint32_t, uint64_t, int) = nullptr;
  int (*activity_enabled)(int) = nullptr;
};

// In the child: the injection library loaded by the program itself (no InitializeInjection: the driver was not
// asked to inject it), the fake CUPTI loaded first as a program's CUDA stack would have it.
bool load_for_attach(const std::string& mode, Feed& f) {
  setenv("FAKE_CUPTI_MODE", mode.c_str(), 1);
  setenv("GEARSHIFT_CUPTI_LIBRARY", GEARSHIFT_FAKE_CUPTI, 1);
  setenv("GEARSHIFT_TRACE_SAMPLE_MS", "0", 1);
  unsetenv("GEARSHIFT_TRACE_OUTPUT");
  unsetenv("GEARSHIFT_RUNTIME_SOCKET");
  void* fake = dlopen(GEARSHIFT_FAKE_CUPTI, RTLD_NOW | RTLD_LOCAL);
  void* lib = dlopen(GEARSHIFT_INJECT_LIBRARY, RTLD_NOW | RTLD_LOCAL);
  if (fake == nullptr || lib == nullptr) return false;
  f.attach = reinterpret_cast<int (*)(int)>(dlsym(lib, "gearshift_feed_attach"));
  f.detach = reinterpret_cast<int (*)()>(dlsym(lib, "gearshift_feed_detach"));
  f.error = reinterpret_cast<const char* (*)()>(dlsym(lib, "gearshift_feed_error"));
  f.launch = reinterpret_cast<void (*)(uint32_t, uint32_t, const char*)>(dlsym(fake, "fake_cupti_launch_named"));
  f.kernel =
      reinterpret_cast<void (*)(const char*, uint64_t, uint64_t, uint32_t)>(dlsym(fake, "fake_cupti_add_kernel"));
  f.enabled = reinterpret_cast<int (*)()>(dlsym(fake, "fake_cupti_enabled_callbacks"));
  f.sync = reinterpret_cast<void (*)(uint32_t, int, int)>(dlsym(fake, "fake_cupti_sync"));
  f.copy = reinterpret_cast<void (*)(uint64_t, uint64_t, uint32_t, uint64_t, int)>(dlsym(fake, "fake_cupti_add_copy"));
  f.activity_enabled = reinterpret_cast<int (*)(int)>(dlsym(fake, "fake_cupti_activity_enabled"));
  return f.attach && f.detach && f.error && f.launch && f.kernel && f.enabled && f.sync && f.copy &&
         f.activity_enabled;
}

}  // namespace

// A launch made before attach is not seen (no callback then); launches after it are, with their completions
// and a synchronize that returned (one that failed is not), and detach writes them all and closes the library's end while the program keeps running (and keeps its own
// end open until it is done).
TEST(FeedAttach, SeesLaunchesAfterAttachAndDetachWritesTheRestAndCloses) {
  PipeRun run = with_pipes(1, [](const std::vector<int>& fd) {
    Feed f;
    if (!load_for_attach("ok", f)) return 2;
    f.launch(CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel, 1, "_Z6beforev");  // before attach: not fed
    if (f.attach(fd[0]) != 0) return 3;
    if (f.enabled() != 16) return 4;  // the 8 launch and 4 + 4 (driver, runtime) synchronize callbacks
    for (uint32_t corr = 2; corr <= 4; ++corr) {
      f.launch(CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel, corr, "_Z4geluPf");
      f.kernel("_Z4geluPf", 10'000'000 + corr * 1000, 10'000'700 + corr * 1000, corr);
    }
    f.sync(9, CUDA_ERROR_LAUNCH_FAILED, 0);  // did not wait for the GPU: not fed
    f.sync(10, CUDA_SUCCESS, 0);             // the driver's
    f.sync(11, CUDA_SUCCESS, 1);             // the runtime's around the driver's: reported once, as the runtime's
    if (f.detach() != 1) return 5;
    if (f.enabled() != 0) return 6;  // callbacks off again
    f.launch(CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel, 5, "_Z5afterv");  // after detach: not fed
    return f.detach() == 0 ? 0 : 7;  // nothing attached any more
  });  // the program's own end closes only now: the reader sees end of file then
  const ChildResult& r = run.child;
  const std::string& all = run.text[0];
  ASSERT_EQ(r.exit_code, 0) << r.stderr_text;
  auto lines = lines_of(all);
  ASSERT_EQ(lines.size(), 8u) << all;
  int launches = 0, completions = 0, syncs = 0;
  for (const auto& l : lines) {
    if (l.starts_with("S ")) {
      ++syncs;
      long corr = 0, enter = 0, exit = 0;
      ASSERT_EQ(std::sscanf(l.c_str(), "S %ld %ld %ld", &corr, &enter, &exit), 3) << l;
      EXPECT_EQ(corr, 10 + syncs - 1);
      EXPECT_EQ(exit - enter, 1000);  // the fake clock ticks 1 µs per read (the driver's inner reads none)
    } else if (l.starts_with("L ")) {
      ++launches;
      long cpu = 0, corr = 0;
      ASSERT_EQ(std::sscanf(l.c_str(), "L %ld %ld", &cpu, &corr), 2) << l;
      EXPECT_EQ(corr, launches + 1);
      EXPECT_TRUE(l.ends_with(" gelu(float*)")) << l;
    } else {
      ++completions;
      long corr = 0, start = 0, end = 0;
      ASSERT_EQ(std::sscanf(l.c_str(), "C %ld %ld %ld", &corr, &start, &end), 3) << l;
      EXPECT_EQ(corr, completions + 1);
      EXPECT_EQ(end - start, 700);
    }
  }
  EXPECT_EQ(launches, 3);
  EXPECT_EQ(completions, 3);
  EXPECT_EQ(syncs, 2);
  EXPECT_EQ(all.find("before"), std::string::npos);
  EXPECT_EQ(all.find("after"), std::string::npos);
  EXPECT_NE(r.stderr_text.find("runtime feed: 3 launches, 3 completed kernels, 0 copies and memsets, 2 synchronizations sent"),
            std::string::npos)
      << r.stderr_text;
  EXPECT_EQ(r.stderr_text.find("warning"), std::string::npos) << r.stderr_text;
}

// The feed sends the job's copies and memsets (Y lines) while it records kernel activity: `run --auto`'s template
// needs them (taken as idle time, Megatron-LM's calibration put 569 instead of 422 W in memory/uncore power and
// was refused, H200 session 24). A CUPTI that refuses their activity costs a note, not the feed.
TEST(FeedAttach, SendsCopiesAndMemsetsWhileKernelActivityIsRecorded) {
  PipeRun run = with_pipes(1, [](const std::vector<int>& fd) {
    Feed f;
    if (!load_for_attach("ok", f)) return 2;
    if (f.attach(fd[0]) != 0) return 3;
    if (!f.activity_enabled(CUPTI_ACTIVITY_KIND_MEMCPY) || !f.activity_enabled(CUPTI_ACTIVITY_KIND_MEMSET) ||
        !f.activity_enabled(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL))
      return 4;
    f.launch(CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel, 2, "_Z4geluPf");
    f.kernel("_Z4geluPf", 10'000'000, 10'000'700, 2);
    f.copy(10'001'000, 10'003'000, 3, 1 << 20, 0);
    f.copy(10'003'000, 10'003'100, 4, 4096, 1);
    if (f.detach() != 1) return 5;
    return f.activity_enabled(CUPTI_ACTIVITY_KIND_MEMCPY) ? 6 : 0;  // off again
  });
  ASSERT_EQ(run.child.exit_code, 0) << run.child.stderr_text;
  const std::string& all = run.text[0];
  EXPECT_NE(all.find(" 1048576 c Memcpy DtoD (Device -> Device)\n"), std::string::npos) << all;
  EXPECT_NE(all.find(" 4096 s Memset (Device)\n"), std::string::npos) << all;
  for (const auto& l : lines_of(all)) {
    if (!l.starts_with("Y ")) continue;
    long corr = 0, start = 0, end = 0;
    ASSERT_EQ(std::sscanf(l.c_str(), "Y %ld %ld %ld", &corr, &start, &end), 3) << l;
    EXPECT_EQ(end - start, corr == 3 ? 2000 : 100) << l;
  }
  EXPECT_NE(run.child.stderr_text.find("1 completed kernels, 2 copies and memsets"), std::string::npos)
      << run.child.stderr_text;

  // Sampled windows (GPU progress while a plan is followed): kernels in each window, no copies.
  PipeRun sampled = with_pipes(1, [](const std::vector<int>& fd) {
    Feed f;
    if (!load_for_attach("ok", f)) return 2;
    setenv("GEARSHIFT_FEED_ACTIVITY_PERIOD_MS", "5000", 1);
    setenv("GEARSHIFT_FEED_ACTIVITY_WINDOW_MS", "1000", 1);
    if (f.attach(fd[0]) != 0) return 3;
    for (int i = 0; i < 500 && !f.activity_enabled(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL); ++i) usleep(1000);
    if (!f.activity_enabled(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL)) return 4;  // the first window opened
    if (f.activity_enabled(CUPTI_ACTIVITY_KIND_MEMCPY) || f.activity_enabled(CUPTI_ACTIVITY_KIND_MEMSET)) return 5;
    return f.detach() == 1 ? 0 : 6;
  });
  EXPECT_EQ(sampled.child.exit_code, 0) << sampled.child.stderr_text;

  PipeRun refused = with_pipes(1, [](const std::vector<int>& fd) {
    Feed f;
    if (!load_for_attach("nocopy", f)) return 2;
    if (f.attach(fd[0]) != 0) return 3;
    f.launch(CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel, 2, "_Z4geluPf");
    return f.detach() == 1 ? 0 : 5;
  });
  ASSERT_EQ(refused.child.exit_code, 0) << refused.child.stderr_text;
  EXPECT_NE(refused.child.stderr_text.find("CUPTI refused copy/memset activity"), std::string::npos)
      << refused.child.stderr_text;
  EXPECT_EQ(refused.child.stderr_text.find("warning"), std::string::npos) << refused.child.stderr_text;
  EXPECT_TRUE(refused.text[0].starts_with("L ")) << refused.text[0];
}

// A CUPTI that does not know a synchronize callback id (CUDA 12's, without cuCtxSynchronize_v2): one note, the
// feed runs with the others.
TEST(FeedAttach, RefusedSynchronizeCallbackIsANoteNotAFailure) {
  PipeRun run = with_pipes(1, [](const std::vector<int>& fd) {
    Feed f;
    if (!load_for_attach("cuda12", f)) return 2;
    if (f.attach(fd[0]) != 0) return 3;
    if (f.enabled() != 15) return 4;  // 8 launch + 7 synchronize callbacks
    f.launch(CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel, 2, "_Z4geluPf");
    f.sync(3, CUDA_SUCCESS, 0);
    return f.detach() == 1 ? 0 : 5;
  });
  ASSERT_EQ(run.child.exit_code, 0) << run.child.stderr_text;
  EXPECT_NE(run.child.stderr_text.find("CUPTI refused 1 of 8 synchronize callbacks"), std::string::npos)
      << run.child.stderr_text;
  EXPECT_EQ(run.child.stderr_text.find("warning"), std::string::npos) << run.child.stderr_text;
  EXPECT_NE(run.text[0].find("S 3 "), std::string::npos) << run.text[0];
}

// The library writes to its own duplicate: its closing at detach leaves the caller's descriptor usable.
TEST(FeedAttach, DetachLeavesTheCallersDescriptorOpen) {
  PipeRun run = with_pipes(1, [](const std::vector<int>& fd) {
    Feed f;
    if (!load_for_attach("ok", f)) return 2;
    if (f.attach(fd[0]) != 0 || f.detach() != 1) return 3;
    return write(fd[0], "X\n", 2) == 2 ? 0 : 4;
  });
  ASSERT_EQ(run.child.exit_code, 0) << run.child.stderr_text;
  EXPECT_EQ(run.text[0], "X\n");
}

TEST(FeedAttach, SecondAttachIsRefusedWithOneWarningAndTheFirstFeedRunsOn) {
  PipeRun t = with_pipes(2, [](const std::vector<int>& fd) {
    setenv("GEARSHIFT_TRACE_QUIET", "1", 1);
    Feed f;
    if (!load_for_attach("ok", f)) return 2;
    if (f.attach(fd[0]) != 0) return 3;
    if (f.attach(fd[1]) != 2) return 4;  // GEARSHIFT_FEED_ALREADY_RUNNING
    if (std::string(f.error()).find("already runs") == std::string::npos) return 5;
    f.launch(CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel, 1, "_Z4geluPf");
    return f.detach() == 1 ? 0 : 6;
  });
  ASSERT_EQ(t.child.exit_code, 0) << t.child.stderr_text;
  EXPECT_EQ(lines_of(t.text[0]).size(), 1u) << t.text[0];
  EXPECT_TRUE(t.text[0].starts_with("L ")) << t.text[0];
  EXPECT_EQ(t.text[1], "");
  EXPECT_EQ(count_lines(t.child.stderr_text), 1) << t.child.stderr_text;
  EXPECT_NE(t.child.stderr_text.find(
                "warning: launch feed not attached: the gearshift tracer already runs in this process"),
            std::string::npos)
      << t.child.stderr_text;
}

// disable() then enable() again: a detached feed may be followed by a new one.
TEST(FeedAttach, AttachAgainAfterDetachFeedsTheNewPipe) {
  PipeRun t = with_pipes(2, [](const std::vector<int>& fd) {
    setenv("GEARSHIFT_TRACE_QUIET", "1", 1);
    Feed f;
    if (!load_for_attach("ok", f)) return 2;
    if (f.attach(fd[0]) != 0) return 3;
    f.launch(CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel, 1, "_Z4geluPf");
    if (f.detach() != 1) return 4;
    if (f.attach(fd[1]) != 0) return 5;
    f.launch(CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel, 2, "_Z9layernormPfi");
    f.launch(CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel, 3, "_Z9layernormPfi");
    return f.detach() == 1 ? 0 : 6;
  });
  ASSERT_EQ(t.child.exit_code, 0) << t.child.stderr_text;
  ASSERT_EQ(lines_of(t.text[0]).size(), 1u) << t.text[0];
  EXPECT_TRUE(t.text[0].ends_with(" 1 gelu(float*)\n")) << t.text[0];
  auto l2 = lines_of(t.text[1]);
  ASSERT_EQ(l2.size(), 2u) << t.text[1];
  EXPECT_TRUE(l2[0].ends_with(" 2 layernorm(float*, int)")) << l2[0];
  EXPECT_TRUE(l2[1].ends_with(" 3 layernorm(float*, int)")) << l2[1];
  EXPECT_EQ(t.child.stderr_text, "");
}

TEST(FeedAttach, NonPipeDescriptorIsRefused) {
  std::string path = (fs::path(::testing::TempDir()) / "attach_not_a_pipe").string();
  auto r = in_child([&] {
    Feed f;
    if (!load_for_attach("ok", f)) return 2;
    int file = open(path.c_str(), O_CREAT | O_TRUNC | O_WRONLY, 0644);
    if (f.attach(file) != 1) return 3;  // GEARSHIFT_FEED_BAD_FD
    if (std::string(f.error()) != "fd " + std::to_string(file) + " is not an open pipe") return 8;
    if (f.attach(-1) != 1 || f.attach(987) != 1) return 4;  // negative, closed
    if (f.enabled() != 0) return 5;    // CUPTI never touched
    if (f.detach() != 0) return 6;
    return std::string(f.error()) == "fd 987 is not an open pipe" ? 0 : 7;
  });
  ASSERT_EQ(r.exit_code, 0) << r.stderr_text;
  EXPECT_EQ(count_lines(r.stderr_text), 3) << r.stderr_text;
  EXPECT_NE(r.stderr_text.find("warning: launch feed not attached: fd -1 is not an open pipe"), std::string::npos)
      << r.stderr_text;
  EXPECT_EQ(fs::file_size(path), 0u);
}

TEST(FeedAttach, MissingCuptiOrAnotherSubscriberIsRefusedWithOneWarning) {
  int p[2];
  ASSERT_EQ(pipe(p), 0);
  auto missing = in_child([&] {
    close(p[0]);
    setenv("GEARSHIFT_CUPTI_LIBRARY", "/nonexistent/libcupti.so.13", 1);
    void* lib = dlopen(GEARSHIFT_INJECT_LIBRARY, RTLD_NOW | RTLD_LOCAL);
    auto attach = reinterpret_cast<int (*)(int)>(dlsym(lib, "gearshift_feed_attach"));
    return attach(p[1]) == 3 ? 0 : 1;  // GEARSHIFT_FEED_NO_CUPTI
  });
  auto profiler = in_child([&] {
    close(p[0]);
    Feed f;
    if (!load_for_attach("multiple", f)) return 2;
    if (f.attach(p[1]) != 4) return 3;  // GEARSHIFT_FEED_OTHER_SUBSCRIBER
    return std::string(f.error()).find("another CUPTI client") != std::string::npos ? 0 : 4;
  });
  close(p[1]);
  EXPECT_EQ(read_to_end(p[0]), "");  // nothing written by a refused attach
  close(p[0]);
  EXPECT_EQ(missing.exit_code, 0) << missing.stderr_text;
  EXPECT_EQ(count_lines(missing.stderr_text), 1) << missing.stderr_text;
  EXPECT_NE(missing.stderr_text.find("launch feed not attached: CUPTI unavailable"), std::string::npos)
      << missing.stderr_text;
  EXPECT_EQ(profiler.exit_code, 0) << profiler.stderr_text;
  EXPECT_EQ(count_lines(profiler.stderr_text), 1) << profiler.stderr_text;
}

// The driver injected the library (CUDA_INJECTION64_PATH, here a feed of `gearshift run`): attach refuses and
// the existing feed keeps its connection; detach does not stop a feed it did not start.
TEST(FeedAttach, RefusedWhenTheDriverAlreadyInjectedTheFeed) {
  int p[2];
  ASSERT_EQ(pipe(p), 0);
  const std::vector<int> fd{-1, p[1]};
  SocketRun run = with_socket([&] {
    close(p[0]);
    setenv("GEARSHIFT_TRACE_QUIET", "1", 1);
    void* lib = inject("ok", "");
    unsetenv("GEARSHIFT_TRACE_OUTPUT");
    if (lib == nullptr) return 2;
    auto attach = reinterpret_cast<int (*)(int)>(dlsym(lib, "gearshift_feed_attach"));
    auto detach = reinterpret_cast<int (*)()>(dlsym(lib, "gearshift_feed_detach"));
    if (attach(fd[1]) != 2) return 3;
    if (detach() != 0) return 4;
    void* fake = dlopen(GEARSHIFT_FAKE_CUPTI, RTLD_NOW | RTLD_NOLOAD);
    auto launch = reinterpret_cast<void (*)(uint32_t, uint32_t, const char*)>(dlsym(fake, "fake_cupti_launch_named"));
    launch(CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel, 1, "_Z4geluPf");
    close(fd[1]);
    std::exit(0);  // the injected feed ends at exit, as before
  });
  close(p[1]);
  const std::string attached = read_to_end(p[0]);
  close(p[0]);
  const ChildResult& r = run.child;
  const std::string& injected = run.text;
  ASSERT_EQ(r.exit_code, 0) << r.stderr_text;
  EXPECT_EQ(lines_of(injected).size(), 1u) << injected;
  EXPECT_EQ(attached, "");
  EXPECT_EQ(count_lines(r.stderr_text), 1) << r.stderr_text;
  EXPECT_NE(r.stderr_text.find("already runs in this process with its launch feed"), std::string::npos)
      << r.stderr_text;
}

// Clock and power sampling goes through src/gpu's NVML wrapper, so the simulated GPU stands in for NVML: the
// trace carries its name, samples with its clocks and power, and the kernel gets the sampled clocks.
TEST(Injection, SamplesClocksAndPowerThroughTheNvmlWrapper) {
  std::string out = out_path("sampled");
  auto r = in_child([&] {
    setenv("GEARSHIFT_NVML_LIBRARY", GEARSHIFT_SIMGPU_PATH, 1);
    setenv("GEARSHIFT_SIMGPU_POWER_W", "250", 1);
    unsetenv("GEARSHIFT_SIMGPU_STATE");
    unsetenv("CUDA_VISIBLE_DEVICES");
    void* lib = inject("ok", out, "5");
    if (lib == nullptr) return 2;
    void* fake = dlopen(GEARSHIFT_FAKE_CUPTI, RTLD_NOW | RTLD_NOLOAD);
    auto launch = reinterpret_cast<void (*)(uint32_t, uint32_t)>(dlsym(fake, "fake_cupti_launch"));
    auto kernel = reinterpret_cast<void (*)(const char*, uint64_t, uint64_t, uint32_t)>(dlsym(fake, "fake_cupti_add_kernel"));
    launch(CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel, 1);
    kernel("_Z4geluPf", 1'000'000, 1'002'000, 1);
    usleep(40'000);  // a few sampling periods
    auto stop = reinterpret_cast<int (*)()>(dlsym(lib, "gearshift_trace_stop"));
    return stop() == 1 ? 0 : 4;
  });
  ASSERT_EQ(r.exit_code, 0) << r.stderr_text;
  EXPECT_EQ(r.stderr_text.find("no clock sampling"), std::string::npos) << r.stderr_text;
  auto tr = gearshift::trace::read_gearshift_trace(out);
  EXPECT_EQ(tr.gpu_name, "NVIDIA H200 SXM 141GB (simulated)");
  ASSERT_GE(tr.samples.size(), 3u);
  for (const auto& s : tr.samples) {
    EXPECT_EQ(s.device, 0);
    EXPECT_EQ(s.mem_clock_mhz, 3201);
    EXPECT_GT(s.sm_clock_mhz, 0);
    EXPECT_EQ(s.power_mw, 250'000);
  }
  ASSERT_EQ(tr.kernel_count(), 1u);
  EXPECT_EQ(tr.ops[0].sm_clock_mhz, tr.samples[0].sm_clock_mhz);
  EXPECT_EQ(tr.ops[0].mem_clock_mhz, 3201);
}
