#include "cupti/runtime_feed.hpp"

#include "trace/graph_units.hpp"

#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <charconv>
#include <chrono>
#include <climits>
#include <cstdio>
#include <ctime>

#include "cupti/tracer.hpp"
#include "feed/protocol.hpp"
#include "feed/socket.hpp"

namespace gearshift::cupti {
namespace {

std::int64_t monotonic_now_ns() noexcept {
  timespec ts{};
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<std::int64_t>(ts.tv_sec) * 1'000'000'000 + ts.tv_nsec;
}

}  // namespace

std::int64_t monotonic_offset_ns(const std::function<std::int64_t()>& other_now_ns, int tries) {
  std::int64_t best_width = INT64_MAX, best = 0;
  for (int i = 0; i < tries; ++i) {
    std::int64_t a = monotonic_now_ns();
    std::int64_t o = other_now_ns();
    std::int64_t b = monotonic_now_ns();
    if (b - a < best_width) {
      best_width = b - a;
      best = a + (b - a) / 2 - o;
    }
  }
  return best;
}

RuntimeFeed::RuntimeFeed(int fd, std::function<std::int64_t()> cupti_now_ns, std::int64_t period_ns,
                         std::size_t queue_capacity)
    : fd_(fd),
      now_(std::move(cupti_now_ns)),
      period_ns_(period_ns < 50'000 ? 50'000 : period_ns),
      queue_(queue_capacity) {
  offset_ns_ = monotonic_offset_ns(now_);
  // The writer must not take the application's signals, and a write to a closed pipe must not kill the
  // program with SIGPIPE: the thread starts with every signal blocked (a thread-directed SIGPIPE then stays
  // pending on it and write() returns EPIPE).
  sigset_t all, old;
  sigfillset(&all);
  pthread_sigmask(SIG_SETMASK, &all, &old);
  thread_ = std::thread([this] { loop(); });
  pthread_sigmask(SIG_SETMASK, &old, nullptr);
}

RuntimeFeed::~RuntimeFeed() { stop(); }

void RuntimeFeed::on_kernel_complete(std::uint32_t correlation, std::int64_t start_ns, std::int64_t end_ns,
                                     std::uint32_t stream, std::uint32_t device,
                                     std::string_view graph_kernel_name) noexcept {
  try {
    std::lock_guard lock(mu_);
    if (stop_ || stats_.broken) return;
    std::int64_t name_id = -1;
    if (!graph_kernel_name.empty()) {
      auto it = graph_names_.find(graph_kernel_name);
      if (it == graph_names_.end()) {
        it = graph_names_.emplace(std::string(graph_kernel_name), static_cast<std::int64_t>(graph_names_.size())).first;
        new_names_.emplace_back(it->second, it->first);
      }
      name_id = it->second;
    }
    completions_.push_back(Completion{correlation, stream, device, start_ns, end_ns, name_id});
  } catch (...) {  // out of memory: the runtime copes with a missing completion
  }
}

void RuntimeFeed::on_copy_complete(std::uint32_t correlation, std::int64_t start_ns, std::int64_t end_ns,
                                   std::uint32_t stream, std::uint32_t device, std::int64_t bytes, bool memset,
                                   std::string_view label) noexcept {
  try {
    std::lock_guard lock(mu_);
    if (stop_ || stats_.broken) return;
    // Labels come from a few enums (copy kind, memory kinds): a linear search beats a map here.
    std::uint32_t id = 0;
    while (id < labels_.size() && labels_[id] != label) ++id;
    if (id == labels_.size()) labels_.emplace_back(label);
    copies_.push_back(CopyDone{correlation, stream, device, start_ns, end_ns, bytes, memset, id});
  } catch (...) {  // out of memory: planning copes with a missing copy
  }
}

const std::string& RuntimeFeed::name_of(const char* symbol) {
  // CUPTI's symbol pointer is stable while the kernel's module is loaded, and the same kernel keeps it:
  // demangle once per kernel, not once per launch.
  auto it = names_.find(symbol);
  if (it == names_.end()) it = names_.emplace(symbol, demangle(symbol)).first;
  return it->second;
}

void RuntimeFeed::drain(std::string& batch) {
  // Completions first, then launches: a kernel's launch is queued before it can complete, so every C line
  // taken here has its L line in the same batch or an earlier one.
  std::vector<Completion> done;
  std::vector<CopyDone> copies;
  std::vector<std::pair<std::int64_t, std::string>> names;
  std::vector<std::string> labels;
  {
    std::lock_guard lock(mu_);
    done.swap(completions_);
    copies.swap(copies_);
    names.swap(new_names_);
    if (!copies.empty()) labels = labels_;  // a few short strings
  }
  // The marker before the launches: its launch was queued before it was issued, so once seen here its L line is
  // in the queue drained below (polled after the drain, a marker issued and written in between would go first).
  std::optional<MarkerSeen> seen;
  if (StreamMarkers* m = markers_.load(std::memory_order_acquire)) seen = m->poll(now_());
  std::uint64_t launches = 0;
  std::uint64_t syncs = 0;
  for (LaunchEvent e; queue_.pop(e);) {
    if (e.sync_exit_ns >= 0) {
      feed::append_sync_line(batch, e.correlation, e.cpu_ns + offset_ns_, e.sync_exit_ns + offset_ns_);
      ++syncs;
      continue;
    }
    if (e.api == LaunchApi::graph) {
      // One L line per graph launch: the launch is one unit of the template; its kernels' C lines carry its
      // correlation.
      feed::append_launch_line(batch, e.cpu_ns + offset_ns_, e.correlation, trace::graph_launch_name(e.graph_id));
      ++launches;
      continue;
    }
    if (e.symbol == nullptr) continue;
    feed::append_launch_line(batch, e.cpu_ns + offset_ns_, e.correlation, name_of(e.symbol));
    ++launches;
  }
  // A name before the first C line that uses it: both were queued under one lock, so every id in `done` was sent
  // in this batch or an earlier one.
  for (const auto& [id, mangled] : names) feed::append_name_line(batch, id, demangle(mangled));
  for (const Completion& c : done)
    feed::append_completion_line(batch, c.correlation, c.start_ns + offset_ns_, c.end_ns + offset_ns_, c.stream, c.device,
                                 c.name_id);
  for (const CopyDone& c : copies)
    feed::append_copy_line(batch, c.correlation, c.start_ns + offset_ns_, c.end_ns + offset_ns_, c.stream, c.device,
                           c.bytes, c.memset, labels[c.label]);
  std::uint64_t markers = 0;
  if (seen) {
    feed::append_marker_line(batch, seen->correlation, seen->not_before_ns + offset_ns_, seen->seen_ns + offset_ns_);
    ++markers;
  }
  std::lock_guard lock(mu_);
  stats_.launches += launches;
  stats_.syncs += syncs;
  stats_.markers += markers;
  stats_.completions += done.size();
  stats_.copies += copies.size();
}

void RuntimeFeed::write_all(const std::string& batch) {
  if (feed::write_all(fd_, batch)) return;
  std::lock_guard lock(mu_);
  if (!stats_.broken)
    std::fprintf(stderr, "gearshift-trace: note: the runtime's launch feed closed; the program runs on\n");
  stats_.broken = true;
}

void RuntimeFeed::loop() noexcept {
  try {
    using clock = std::chrono::steady_clock;
    auto next_offset = clock::now() + std::chrono::seconds(1);
    std::string batch;
    for (;;) {
      bool last;
      {
        std::unique_lock lock(mu_);
        cv_.wait_for(lock, std::chrono::nanoseconds(period_ns_), [this] { return stop_; });
        last = stop_;
      }
      if (clock::now() >= next_offset) {  // the two clocks may drift apart slowly
        offset_ns_ = monotonic_offset_ns(now_);
        next_offset = clock::now() + std::chrono::seconds(1);
      }
      batch.clear();
      drain(batch);
      bool broken;
      {
        std::lock_guard lock(mu_);
        broken = stats_.broken;
      }
      if (!batch.empty() && !broken) write_all(batch);
      if (last) return;
    }
  } catch (...) {
    std::lock_guard lock(mu_);
    stats_.broken = true;
  }
}

void RuntimeFeed::stop() noexcept {
  {
    std::lock_guard lock(mu_);
    if (stop_) return;
    stop_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
  if (fd_ >= 0) {
    ::shutdown(fd_, SHUT_WR);  // not a socket (a pipe): ENOTSOCK, nothing to do
    ::close(fd_);
  }
  fd_ = -1;
}

FeedStats RuntimeFeed::stats() const {
  std::lock_guard lock(mu_);
  FeedStats s = stats_;
  s.dropped_launches = queue_.dropped();
  return s;
}

}  // namespace gearshift::cupti
