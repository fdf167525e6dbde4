#include "runtime/feed_server.hpp"

#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <stdexcept>

#include <fmt/core.h>

#include "gpu/cuda_visible.hpp"
#include "runtime/session.hpp"
#include "trace/line_split.hpp"

namespace gearshift::runtime {

namespace {
feed::Listener make_listener() {
  try {
    return feed::Listener();
  } catch (const std::runtime_error& e) {
    throw SessionError(SessionError::Kind::kFailure, e.what());
  }
}
}  // namespace

// NVML index of a job process's CUDA ordinal: through its CUDA_VISIBLE_DEVICES and NVML's devices (`infos`,
// empty when NVML is not at hand: then only plain indices map, PCI bus order assumed as gpu/cuda_visible.hpp
// says).
GpuResolver gpu_resolver(std::vector<gpu::DeviceInfo> infos) {
  return [infos = std::move(infos)](const feed::Hello& h, int ordinal) -> std::optional<unsigned> {
    if (ordinal < 0) return std::nullopt;
    const auto at = static_cast<std::size_t>(ordinal);
    if (!infos.empty()) {
      try {
        const std::vector<unsigned> idx =
            gpu::cuda_visible_nvml_indices(infos, h.cuda_visible_devices
                                                      ? std::optional<std::string_view>(*h.cuda_visible_devices)
                                                      : std::nullopt);
        if (at < idx.size()) return idx[at];
      } catch (const std::invalid_argument&) {  // a MIG instance: not a whole GPU we control
      }
      return std::nullopt;
    }
    if (!h.cuda_visible_devices) return static_cast<unsigned>(ordinal);
    std::size_t start = 0;
    for (std::size_t i = 0;; ++i) {
      const std::size_t comma = h.cuda_visible_devices->find(',', start);
      const std::string entry = h.cuda_visible_devices->substr(start, comma == std::string::npos ? comma : comma - start);
      if (i == at) {
        if (entry.empty() || entry.find_first_not_of("0123456789") != std::string::npos) return std::nullopt;
        return static_cast<unsigned>(std::stoul(entry));
      }
      if (comma == std::string::npos) return std::nullopt;
      start = comma + 1;
    }
  };
}

std::string FeedProcess::describe() const {
  std::string who = fmt::format("pid {}", hello.pid);
  if (hello.rank >= 0) {
    who += fmt::format(" rank {}", hello.rank);
    std::string more;
    if (hello.local_rank >= 0) more = fmt::format("local {}", hello.local_rank);
    if (hello.world_size >= 0) more += fmt::format("{}world {}", more.empty() ? "" : ", ", hello.world_size);
    if (!more.empty()) who += " (" + more + ")";
  } else {
    who += " (no rank)";
  }
  const std::string where = gpu ? fmt::format("GPU {}{}", *gpu, gpu_assumed ? " (assumed)" : "") : "GPU unknown";
  return fmt::format("{}, {}: {} kernels launched{}, {}", who, where, launches,
                     copies > 0 ? fmt::format(" ({} copies and memsets recorded)", copies) : std::string(),
                     followed ? "followed" : "not followed");
}

int assumed_ordinal(const feed::Hello& hello) {
  if (hello.local_rank < 0) return 0;
  if (hello.cuda_visible_devices) {
    // One visible device: ordinal 0 whatever the local rank (the launcher already gave each rank its GPU).
    const std::string& v = *hello.cuda_visible_devices;
    if (v.find(',') == std::string::npos) return 0;
  }
  return hello.local_rank;
}

FeedServer::FeedServer(GpuResolver resolve, Sink sink)
    : listener_(make_listener()), resolve_(std::move(resolve)), sink_(std::move(sink)) {}

FeedServer::~FeedServer() { stop(); }

void FeedServer::start() {
  thread_ = std::thread([this] { loop(); });
}

void FeedServer::stop() {
  stop_.store(true);
  if (thread_.joinable()) thread_.join();
  std::lock_guard lock(mu_);
  for (std::size_t i = 0; i < connections_.size(); ++i) close_connection(i);
  listener_.remove();
}

void FeedServer::accept_all() {
  for (int fd; (fd = listener_.accept_one()) >= 0;) {
    std::lock_guard lock(mu_);
    FeedProcess p;
    p.index = static_cast<std::uint32_t>(processes_.size());
    processes_.push_back(p);
    connections_.push_back(Connection{fd, false, {}});
  }
}

void FeedServer::close_connection(std::size_t i) {
  Connection& c = connections_[i];
  if (c.fd >= 0) close(c.fd);
  c.fd = -1;
  c.pending.clear();
}

bool FeedServer::read_from(std::size_t i) {
  char chunk[65536];
  for (;;) {
    const ssize_t got = read(connections_[i].fd, chunk, sizeof chunk);
    if (got < 0 && errno == EINTR) continue;
    if (got < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return true;
    if (got <= 0) return false;
    trace::for_each_line(connections_[i].pending, std::string_view(chunk, static_cast<std::size_t>(got)),
                         [&](std::string_view l) { on_line(i, l); });
    if (connections_[i].fd < 0) return false;  // refused (no hello)
    if (static_cast<std::size_t>(got) < sizeof chunk) return true;
  }
}

void FeedServer::on_line(std::size_t i, std::string_view line) {
  Connection& c = connections_[i];
  if (c.fd < 0) return;
  if (!c.hello) {
    auto h = feed::parse_hello_line(line);
    std::string others;
    {
      std::lock_guard lock(mu_);
      if (!h) {  // not our protocol (or another version): its writer sees the connection close
        ++refused_;
        close_connection(i);
        return;
      }
      c.hello = true;
      FeedProcess& p = processes_[i];
      p.hello = *h;
      p.gpu = resolve_(*h, assumed_ordinal(*h));
      if (!p.gpu) p.gpu = resolve_(*h, 0);  // more local ranks than visible GPUs: they share (CUDA's default)
      if (!all_.empty()) others = all_;  // a latecomer: what every process was told
      else if (followed_.load() >= 0) others = others_;  // ... or every process not followed
    }
    if (!others.empty()) send(static_cast<std::uint32_t>(i), others);
    return;
  }
  auto e = feed::parse_feed_line(line);
  FeedProcess& p = processes_[i];
  if (!e) {
    std::lock_guard lock(mu_);
    ++p.bad_lines;
    return;
  }
  e->correlation = feed::namespaced_correlation(p.index, e->correlation);
  if (e->name_id >= 0) e->name_id = feed::namespaced_correlation(p.index, e->name_id);  // ids are per process too
  {
    std::lock_guard lock(mu_);
    switch (e->kind) {
      case feed::FeedEvent::Kind::launch: ++p.launches; break;
      case feed::FeedEvent::Kind::complete:
        ++p.completions;
        if (p.gpu_assumed || !p.gpu) {
          p.gpu = resolve_(p.hello, e->device);
          p.gpu_assumed = false;
        }
        break;
      case feed::FeedEvent::Kind::sync: ++p.syncs; break;
      case feed::FeedEvent::Kind::marker: ++p.markers; break;
      case feed::FeedEvent::Kind::copy: ++p.copies; break;
      case feed::FeedEvent::Kind::name: break;
    }
  }
  sink_(p, *e);
}

void FeedServer::loop() {
  std::vector<pollfd> fds;
  std::vector<std::size_t> which;
  // After the job ended: a process it left behind (a daemon holding its connection) may keep sending; 2 s more.
  std::optional<std::chrono::steady_clock::time_point> until;
  for (;;) {
    fds.clear();
    which.clear();
    fds.push_back({listener_.fd(), POLLIN, 0});
    std::size_t open = 0;
    for (std::size_t i = 0; i < connections_.size(); ++i)
      if (connections_[i].fd >= 0) {
        fds.push_back({connections_[i].fd, POLLIN, 0});
        which.push_back(i);
        ++open;
      }
    const bool stopping = stop_.load();
    if (stopping && !until) until = std::chrono::steady_clock::now() + std::chrono::seconds(2);
    if (until && std::chrono::steady_clock::now() > *until) return;
    const int r = poll(fds.data(), fds.size(), 50);
    if (r < 0 && errno != EINTR) return;
    if (r <= 0) {
      // The job ended and nothing more came within the period (or every connection ended): done.
      if (stopping) return;
      continue;
    }
    if (fds[0].revents & POLLIN) accept_all();
    for (std::size_t k = 1; k < fds.size(); ++k) {
      if (fds[k].revents == 0) continue;
      const std::size_t i = which[k - 1];
      if (!read_from(i)) {
        std::lock_guard lock(mu_);
        close_connection(i);
      }
    }
    if (stopping && open == 0 && !(fds[0].revents & POLLIN)) return;
  }
}

void FeedServer::follow(std::uint32_t index, const std::string& others) {
  std::int64_t none = -1;
  if (!followed_.compare_exchange_strong(none, index)) return;
  std::vector<std::uint32_t> to;
  {
    std::lock_guard lock(mu_);
    if (index < processes_.size()) processes_[index].followed = true;
    others_ = others;
    for (std::size_t i = 0; i < connections_.size(); ++i)
      if (i != index && connections_[i].fd >= 0 && connections_[i].hello) to.push_back(static_cast<std::uint32_t>(i));
  }
  if (others.empty()) return;
  for (std::uint32_t i : to) send(i, others);
}

void FeedServer::tell_all(const std::string& line) {
  std::vector<std::uint32_t> to;
  {
    std::lock_guard lock(mu_);
    all_ = line;
    for (std::size_t i = 0; i < connections_.size(); ++i)
      if (connections_[i].fd >= 0 && connections_[i].hello) to.push_back(static_cast<std::uint32_t>(i));
  }
  for (std::uint32_t i : to) send(i, line);
}

bool FeedServer::send(std::uint32_t index, const std::string& line) {
  std::lock_guard lock(mu_);
  if (index >= connections_.size() || connections_[index].fd < 0) return false;
  const ssize_t n = ::send(connections_[index].fd, line.data(), line.size(), MSG_DONTWAIT | MSG_NOSIGNAL);
  return n == static_cast<ssize_t>(line.size());
}

std::vector<FeedProcess> FeedServer::processes() const {
  std::lock_guard lock(mu_);
  return processes_;
}

FeedProcess FeedServer::process(std::uint32_t index) const {
  std::lock_guard lock(mu_);
  return index < processes_.size() ? processes_[index] : FeedProcess{};
}

std::uint64_t FeedServer::refused() const {
  std::lock_guard lock(mu_);
  return refused_;
}

}  // namespace gearshift::runtime
