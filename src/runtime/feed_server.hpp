// `gearshift run`'s end of the launch feed: the listening socket the job's CUDA processes connect to
// (feed/socket.hpp), one reader thread polling the listener and every connection, and what each process said
// (its hello, how much it launched, which GPU it runs on). Every valid event goes to the sink with its
// correlation id namespaced per connection (feed::namespaced_correlation), so that two processes never collide.
// Control commands go back to one process, to every process but the followed one, or to all (feed/protocol.hpp).
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "feed/protocol.hpp"
#include "feed/socket.hpp"
#include "gpu/nvml.hpp"

namespace gearshift::runtime {

// One CUDA process of the job, as its connection told us.
struct FeedProcess {
  std::uint32_t index = 0;  // connection number, in order of connection: the namespace of its correlation ids
  feed::Hello hello;
  std::uint64_t launches = 0, completions = 0, syncs = 0, markers = 0, copies = 0, bad_lines = 0;
  std::optional<unsigned> gpu;  // NVML index of the GPU it runs on; nullopt: unknown
  bool gpu_assumed = true;      // from its hello alone (no completed kernel named its device yet)
  bool followed = false;
  // "pid 540 rank 1 (local 1, world 2), GPU 1: 112 kernels launched, followed" (the exit summary's line).
  std::string describe() const;
};

// The NVML index of CUDA device `ordinal` of a process that said `hello`; nullopt when it cannot be known.
using GpuResolver = std::function<std::optional<unsigned>(const feed::Hello& hello, int ordinal)>;

// The device ordinal a process uses before any of its kernels says: its local rank when it has one (launchers
// give each local rank its GPU, torch.cuda.set_device(local_rank)) and more than one GPU may be visible, else 0
// (CUDA's current device by default). A local rank beyond the visible GPUs falls back to ordinal 0.
int assumed_ordinal(const feed::Hello& hello);

// The resolver of `gearshift run` and `calibrate`: through the process's CUDA_VISIBLE_DEVICES and NVML's devices `infos` (empty without NVML: plain indices, PCI bus order assumed).
GpuResolver gpu_resolver(std::vector<gpu::DeviceInfo> infos);

class FeedServer {
 public:
  // `sink` gets every valid event, on the reader thread (it must not throw).
  using Sink = std::function<void(const FeedProcess& from, const feed::FeedEvent& e)>;

  // Listens; throws SessionError(kFailure) (session.hpp) when the socket cannot be made.
  FeedServer(GpuResolver resolve, Sink sink);
  ~FeedServer();
  FeedServer(const FeedServer&) = delete;
  FeedServer& operator=(const FeedServer&) = delete;

  const std::string& socket_path() const { return listener_.path(); }
  void start();  // the reader thread
  // The job ended: reads what its processes still send (until each connection ends or nothing came for 50 ms;
  // 2 s at most),
  // joins the reader, closes every connection and removes the socket's directory.
  void stop();

  // Marks connection `index` as the followed process and sends `others` (commands for every process not
  // followed, e.g. no kernel activity; may be empty) to the others, now and to those that connect later.
  // First call wins. Any thread.
  void follow(std::uint32_t index, const std::string& others);
  // Sends `line` to every process, now and to those that connect later (`run --auto` gave up: every feed off).
  // Any thread.
  void tell_all(const std::string& line);
  // The followed connection, or -1.
  std::int64_t followed() const { return followed_.load(); }
  // Sends `line` to connection `index` (non-blocking: a process that stopped reading loses it; false then).
  bool send(std::uint32_t index, const std::string& line);

  std::vector<FeedProcess> processes() const;  // a copy, in order of connection
  FeedProcess process(std::uint32_t index) const;
  std::uint64_t refused() const;  // connections closed because their first line was no hello

 private:
  struct Connection {
    int fd = -1;
    bool hello = false;
    std::string pending;
  };
  void loop();
  void accept_all();
  // Reads what connection i has; false when it ended.
  bool read_from(std::size_t i);
  void on_line(std::size_t i, std::string_view line);
  void close_connection(std::size_t i);  // under mu_

  feed::Listener listener_;
  GpuResolver resolve_;
  Sink sink_;
  mutable std::mutex mu_;                  // connections_ fds, processes_, others_, refused_
  std::vector<Connection> connections_;    // reader thread (fds read under mu_ by send)
  std::vector<FeedProcess> processes_;
  std::string others_;
  std::string all_;  // tell_all's line, for latecomers
  std::uint64_t refused_ = 0;
  std::atomic<std::int64_t> followed_{-1};
  std::atomic<bool> stop_{false};
  std::thread thread_;
};

}  // namespace gearshift::runtime
