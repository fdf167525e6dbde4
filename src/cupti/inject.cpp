// libgearshift_inject.so: loaded into an unmodified CUDA program by the driver (CUDA_INJECTION64_PATH calls
// InitializeInjection at cuInit) and by NVTX (NVTX_INJECTION64_PATH calls InitializeInjectionNvtx2, which we
// forward to the same CUPTI so that NVTX ranges become CUPTI marker records). Under `gearshift run` every CUDA
// process that loads it connects to the runtime's socket (GEARSHIFT_RUNTIME_SOCKET: a path reaches workers that
// launchers start without our descriptors) and sends its hello, then its launch feed. A program may also load it
// itself and start the runtime launch feed on its running CUDA process with gearshift_feed_attach(fd) (the
// Python package's gearshift.torch.enable(); entry points in inject_api.h); both starts share one code path.
//
// Rule: the traced program must run on untouched whatever happens here. Every failure (CUPTI missing or too
// old, another subscriber, cannot write the file) prints one warning line and leaves tracing off; no
// exception crosses into CUDA/CUPTI/NVTX (catch-all at every entry point below).
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <memory>
#include <mutex>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include <dlfcn.h>

#include <nlohmann/json.hpp>

#include "cupti/activity_decode.hpp"
#include "cupti/buffer_pool.hpp"
#include "cupti/callback_handler.hpp"
#include "cupti/clock_source.hpp"
#include "cupti/config.hpp"
#include "cupti/controller.hpp"
#include "cupti/feed_control.hpp"
#include "cupti/cuda_driver.hpp"
#include "cupti/cupti_api.hpp"
#include "cupti/inject_api.h"
#include "cupti/launch_table.hpp"
#include "cupti/marker_issuer.hpp"
#include "cupti/runtime_feed.hpp"
#include "cupti/stream_marker.hpp"
#include "cupti/tracer.hpp"
#include "feed/protocol.hpp"
#include "feed/socket.hpp"
#include "trace/gearshift_writer.hpp"

#define GEARSHIFT_EXPORT extern "C" __attribute__((visibility("default")))

namespace gearshift::cupti {
namespace {

constexpr CUpti_ActivityKind kRequiredKinds[] = {CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL, CUPTI_ACTIVITY_KIND_MEMCPY,
                                                 CUPTI_ACTIVITY_KIND_MEMSET};

void say(const char* level, const std::string& msg) noexcept {
  std::fprintf(stderr, "gearshift-trace: %s: %s\n", level, msg.c_str());
}
void warn_untraced(const std::string& msg) noexcept { say("warning", msg + "; the program runs on untraced"); }

// CUPTI is loaded once per process, by whichever of the two injection entry points comes first.
struct SharedCupti {
  std::once_flag once;
  std::optional<CuptiApi> api;
  std::string error;
};
SharedCupti& shared_cupti() {
  static auto* s = new SharedCupti();  // leaked on purpose: used until the very end of the process
  std::call_once(s->once, [] {
    const char* o = std::getenv(kEnvCuptiLibrary);
    s->api = load_cupti(o != nullptr ? o : "", &s->error);
  });
  return *s;
}

struct State {
  TracerConfig config;
  const CuptiApi* api = nullptr;
  pid_t pid = 0;
  LaunchTable launches;
  std::unique_ptr<BufferPool> pool;
  std::unique_ptr<ClockSource> clocks;
  std::unique_ptr<Tracer> tracer;      // null: no trace file (the runtime feed only)
  std::unique_ptr<RuntimeFeed> feed;   // null: no runtime feed; never reset once set (callbacks read it)
  std::unique_ptr<FeedControl> control;  // the runtime's commands (with the feed only); read by the controller
  // Stream markers (with the feed only, when the driver has what they need); never reset once set.
  std::unique_ptr<StreamMarkers> markers;
  std::unique_ptr<MarkerIssuer> issuer;
  std::string markers_unavailable;  // why there are none
  // Owned here, read through the atomic: the controller's own thread may stop the trace (and read it) while
  // start() is still storing it.
  std::unique_ptr<Controller> controller_owner;
  std::atomic<Controller*> controller{nullptr};
  CUpti_SubscriberHandle subscriber = nullptr;
  bool marker_enabled = false;
  std::mutex stop_mu;  // the two flags below, and one stop at a time
  bool trace_done = false;
  bool cupti_off = false;
  bool attached = false;  // started by gearshift_feed_attach (only such a feed may be detached)
  std::string output;
};
// Leaked on purpose: never destroyed, so that no static destructor (in this process or a forked child)
// writes into the trace file. Finished explicitly by stop_tracing(). A start after a finished one (detach,
// then attach again) replaces it and leaks the old one: CUPTI or a late buffer may still hold its address.
std::atomic<State*> g_state{nullptr};
// One start or detach at a time: the driver's InitializeInjection and the program's attach/detach calls may
// come from different threads.
std::mutex g_start_mu;

// Stream markers on the launch path: on a launch's entry claim the marker when one is due (the claim names the
// launch's correlation id), on that launch's exit write it on the launch's stream.
void mark_launch(State& s, CUpti_CallbackId cbid, const CUpti_CallbackData* cb, const LaunchEvent* launch) noexcept {
  if (cb == nullptr || launch_api_of(cbid) == LaunchApi::unknown) return;
  if (cb->callbackSite == CUPTI_API_ENTER) {
    // A graph launch has its L line (one unit of the template) and a stream: a marker after it anchors the
    // runtime on the graph's end, as after a kernel.
    if (launch != nullptr && (launch->api == LaunchApi::graph || launch->symbol != nullptr))
      s.markers->claim(launch->cpu_ns, launch->correlation);
    return;
  }
  // Only the launch holding the claim (correlation ids are unique per call) may issue or give it back.
  if (!s.markers->claimed_by(cb->correlationId)) return;
  CUstream stream = nullptr;
  bool per_thread = false;
  if (!launch_stream(cbid, cb, stream, per_thread)) {
    s.markers->abandon(s.markers->claimed_ns());
    return;
  }
  const auto* rc = static_cast<const CUresult*>(cb->functionReturnValue);
  s.issuer->after_launch(stream, per_thread, rc == nullptr || *rc == CUDA_SUCCESS);
}

// The hot path: every launch's API entry and exit, and (with the feed) every synchronize's. Times are the CUPTI
// clock (cuptiGetTimestamp), the clock of the activity records too.
void CUPTIAPI on_callback(void* userdata, CUpti_CallbackDomain domain, CUpti_CallbackId cbid,
                          const void* data) noexcept {
  try {
    if (userdata == nullptr) return;
    State* s = static_cast<State*>(userdata);
    LaunchEvent e;
    const auto* cb = static_cast<const CUpti_CallbackData*>(data);
    auto now = [s] { return s->api->now_ns(); };
    // Callback ids are per domain: a runtime id may equal a driver launch id.
    const bool fed = (domain == CUPTI_CB_DOMAIN_DRIVER_API && on_driver_api(s->launches, cbid, cb, now, e)) ||
                     on_sync_api(domain, cbid, cb, now, e);
    if (fed && e.api == LaunchApi::graph && s->api->get_graph_exec_id != nullptr && cb->functionParams != nullptr) {
      // cuGraphLaunch and its _ptsz variant take (hGraphExec, hStream): one id lookup per graph launch.
      const auto* p = static_cast<const cuGraphLaunch_params*>(cb->functionParams);
      std::uint32_t id = 0;
      if (s->api->get_graph_exec_id(p->hGraph, &id) == CUPTI_SUCCESS) {
        e.graph_id = id;
        s->launches.record_graph(e.correlation, id);
      }
    }
    if (fed && s->feed) s->feed->on_launch(e);
    if (fed && e.sync_exit_ns >= 0 && s->tracer) {  // the trace records the job's synchronizes too
      trace::SyncRecord y;
      y.scope = is_stream_sync(domain, cbid) ? trace::SyncRecord::Scope::stream : trace::SyncRecord::Scope::device;
      y.correlation = e.correlation;
      y.enter_ns = e.cpu_ns;
      y.duration_ns = std::max<std::int64_t>(0, e.sync_exit_ns - e.cpu_ns);
      s->tracer->add(y);
    }
    if (s->issuer && domain == CUPTI_CB_DOMAIN_DRIVER_API)
      mark_launch(*s, cbid, cb, fed && e.sync_exit_ns < 0 ? &e : nullptr);
    if (s->issuer && domain == CUPTI_CB_DOMAIN_RESOURCE && cbid == CUPTI_CBID_RESOURCE_CONTEXT_DESTROY_STARTING)
      s->issuer->context_destroying();
  } catch (...) {
  }
}

void CUPTIAPI buffer_requested(uint8_t** buffer, size_t* size, size_t* max_records) noexcept {
  try {
    *max_records = 0;
    State* s = g_state.load(std::memory_order_acquire);
    uint8_t* b = s != nullptr ? s->pool->acquire() : nullptr;
    *buffer = b;
    *size = b != nullptr ? s->pool->buffer_bytes() : 0;
  } catch (...) {
    *buffer = nullptr;
    *size = 0;
  }
}

void CUPTIAPI buffer_completed(CUcontext ctx, uint32_t stream, uint8_t* buffer, size_t, size_t valid) noexcept {
  State* s = g_state.load(std::memory_order_acquire);
  if (s == nullptr) return;
  try {
    std::string label;
    CUpti_Activity* rec = nullptr;
    while (buffer != nullptr && s->api->activity_get_next_record(buffer, valid, &rec) == CUPTI_SUCCESS) {
      Decoded d = decode_record(rec, s->api->v13_layout(), label);
      if (const auto* g = std::get_if<GpuActivity>(&d)) {
        if (s->tracer) s->tracer->add(*g);
        if (s->feed && g->kind == trace::OpKind::kernel)
          // A graph's kernels share its launch's one L line: each is named on its own C line (CUPTI < 13 records
          // no graph id; the launch table knows the launch was a graph launch).
          s->feed->on_kernel_complete(g->correlation, g->start_ns, g->end_ns, g->stream, g->device,
                                      g->graph_id != 0 || s->launches.lookup(g->correlation) == LaunchApi::graph
                                          ? g->name
                                          : std::string_view{});
        else if (s->feed)  // a copy or memset: the template's (FeedCollector)
          s->feed->on_copy_complete(g->correlation, g->start_ns, g->end_ns, g->stream, g->device, g->bytes,
                                    g->kind == trace::OpKind::memset, g->name);
      } else if (const auto* m = std::get_if<MarkerActivity>(&d)) {
        if (s->tracer) s->tracer->add(*m);
      }
    }
    size_t dropped = 0;
    if (s->tracer && s->api->activity_get_num_dropped_records(ctx, stream, &dropped) == CUPTI_SUCCESS && dropped > 0)
      s->tracer->add_dropped(dropped, 0);
  } catch (...) {
  }
  s->pool->release(buffer);
}

// Finishes the trace file with what CUPTI has delivered (the caller flushed) and says what was written.
void finish_trace_file(State& s, const std::string& reason, bool complete) {
  const CuptiApi& api = *s.api;
  size_t dropped = 0;
  if (api.activity_get_num_dropped_records(nullptr, 0, &dropped) != CUPTI_SUCCESS) dropped = 0;
  s.tracer->add_dropped(dropped, s.pool->refused());
  if (Controller* c = s.controller.load(std::memory_order_acquire)) c->sample_now();
  s.tracer->finish(complete, reason);
  TracerStats st = s.tracer->stats();
  if (!s.tracer->ok()) {
    warn_untraced("trace " + s.output + " is incomplete: " + s.tracer->error());
    return;
  }
  if (!s.config.quiet) {
    std::ostringstream o;
    o << "wrote " << s.output << ": " << st.kernels << " kernels (" << st.graph_kernels << " in CUDA graphs), "
      << st.memcpys << " memcpys, " << st.memsets << " memsets, " << st.ranges << " NVTX ranges ("
      << st.step_ranges << " steps), " << st.samples << " clock samples, " << st.syncs << " synchronizes; " << reason;
    if (st.dropped_cupti + st.dropped_buffers > 0)
      o << "; INCOMPLETE: " << st.dropped_cupti << " records dropped, " << st.dropped_buffers
        << " buffer requests refused";
    say("note", o.str());
  }
}

// Turns the synchronize callbacks (both API levels) on or off; returns how many CUPTI refused.
int set_sync_callbacks(const State& s, bool on) {
  int refused = 0;
  for (CUpti_CallbackId cbid : kSyncDriverCallbacks)
    refused += s.api->enable_callback(on ? 1 : 0, s.subscriber, CUPTI_CB_DOMAIN_DRIVER_API, cbid) != CUPTI_SUCCESS;
  for (CUpti_CallbackId cbid : kSyncRuntimeCallbacks)
    refused += s.api->enable_callback(on ? 1 : 0, s.subscriber, CUPTI_CB_DOMAIN_RUNTIME_API, cbid) != CUPTI_SUCCESS;
  return refused;
}

// ", kernel activity in the first W of every P ms (N windows)" for a feed with sampled activity, else "".
std::string sampled_note(const State& s) {
  Controller* ctl = s.controller.load(std::memory_order_acquire);
  if (s.tracer || ctl == nullptr) return "";
  const ActivityWindows w = ctl->windows();
  if (!w.sampled()) return "";
  return ", kernel activity in the first " + std::to_string(w.window_ns / 1'000'000) + " of every " +
         std::to_string(w.period_ns / 1'000'000) + " ms at the end (" + std::to_string(ctl->windows_opened()) +
         " windows)";
}

// ", N stream markers (M seen)" when any were issued or asked for and failed, else "".
std::string markers_note(const State& s) {
  if (!s.markers) return s.markers_unavailable.empty() ? "" : ", no stream markers: " + s.markers_unavailable;
  const MarkerStats m = s.markers->stats();
  const std::string problem = s.issuer->problem();
  if (m.issued == 0 && problem.empty()) return "";
  return ", " + std::to_string(m.issued) + " stream markers (" + std::to_string(m.seen) + " seen)" +
         (problem.empty() ? "" : "; markers off: " + problem);
}

// Ends the trace file (steps reached, duration, gearshift_trace_stop(), exit) and, with `everything` or when
// no runtime feed needs CUPTI, turns CUPTI off: callbacks and activity off, last buffers flushed, the feed's
// last lines written. The program runs on. Safe from the controller thread, the exit handler and
// gearshift_trace_stop(); one at a time.
void stop_tracing(State& s, const std::string& reason, bool complete, bool everything) noexcept {
  try {
    std::lock_guard lock(s.stop_mu);
    const CuptiApi& api = *s.api;
    const bool turn_off = !s.cupti_off && (everything || !s.feed);
    if (turn_off) {
      for (CUpti_CallbackId cbid : kLaunchCallbacks) api.enable_callback(0, s.subscriber, CUPTI_CB_DOMAIN_DRIVER_API, cbid);
      if (s.feed || s.tracer) set_sync_callbacks(s, false);
      for (CUpti_ActivityKind k : kRequiredKinds) api.activity_disable(k);
      if (s.marker_enabled) api.activity_disable(CUPTI_ACTIVITY_KIND_MARKER);
    }
    if (!s.cupti_off)
      if (CUptiResult r = api.activity_flush_all(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED); r != CUPTI_SUCCESS)
        say("note", "final CUPTI flush failed: " + api.describe(r));
    if (turn_off) {
      if (s.feed) {
        s.feed->stop();
        FeedStats fs = s.feed->stats();
        if (!s.config.quiet || fs.dropped_launches > 0)
          say("note", "runtime feed: " + std::to_string(fs.launches) + " launches, " + std::to_string(fs.completions) +
                          " completed kernels, " + std::to_string(fs.copies) + " copies and memsets, " +
                          std::to_string(fs.syncs) + " synchronizations sent, " +
                          std::to_string(fs.dropped_launches) + " launches dropped (queue full)" +
                          (fs.broken ? ", closed early by the runtime" : "") + sampled_note(s) + markers_note(s));
      }
      api.unsubscribe(s.subscriber);
      s.cupti_off = true;
    }
    if (s.tracer && !s.trace_done) {
      s.trace_done = true;
      finish_trace_file(s, reason, complete);
    }
  } catch (...) {
  }
}

void at_exit() noexcept {
  State* s = g_state.load(std::memory_order_acquire);
  if (s == nullptr || s->pid != getpid()) return;  // a forked child: the file belongs to the parent
  try {
    if (Controller* c = s->controller.load(std::memory_order_acquire)) c->shutdown();
    stop_tracing(*s, "program exited", true, true);
  } catch (...) {
  }
}

// Claims `path` for this process; a second traced process of the same run (DDP ranks, subprocesses) writes
// `path.<pid>` instead of overwriting the first one's file.
std::string claim_output(const std::string& path, pid_t pid) {
  int fd = open(path.c_str(), O_CREAT | O_EXCL | O_WRONLY | O_CLOEXEC, 0644);
  if (fd >= 0) {
    close(fd);
    return path;
  }
  if (errno != EEXIST) return path;  // let the writer report the real error
  struct stat st {};
  if (stat(path.c_str(), &st) == 0 && !S_ISREG(st.st_mode)) return path;  // a device or pipe: write into it
  return path + "." + std::to_string(pid);
}

std::string command_line() {
  std::ifstream f("/proc/self/cmdline", std::ios::binary);
  std::string all((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  for (char& c : all)
    if (c == '\0') c = ' ';
  while (!all.empty() && all.back() == ' ') all.pop_back();
  return all;
}

// True when `fd` is an open pipe (or socket), the only thing gearshift_feed_attach's feed writes to.
bool is_pipe(int fd) {
  struct stat st {};
  return fd >= 0 && fstat(fd, &st) == 0 && (S_ISFIFO(st.st_mode) || S_ISSOCK(st.st_mode));
}

// How long a process waits for `gearshift run` to accept its connection (only a listener whose backlog is full
// makes it wait: a missing or stale socket fails at once).
constexpr int kConnectTimeoutMs = 1000;

// This process's connection to the runtime's socket (`gearshift run`), its hello line sent; -1 after one note
// when there is none to be had. The job runs on either way.
int connect_runtime(const std::string& path) {
  std::string why;
  const int fd = feed::connect_socket(path, kConnectTimeoutMs, &why);
  if (fd < 0) {
    say("note", "no launch feed (" + std::string(feed::kEnvSocket) + "): " + why);
    return -1;
  }
  std::string hello;
  feed::append_hello_line(hello, feed::hello_from_env(getpid(), [](const char* k) { return std::getenv(k); }));
  if (!feed::write_all(fd, hello)) {
    say("note", "no launch feed: " + path + " closed the connection");
    close(fd);
    return -1;
  }
  return fd;
}

// The feed's sampled kernel activity from the configuration; none for a trace file, which records every kernel.
ActivityWindows feed_windows(const TracerConfig& cfg, bool tracing) {
  ActivityWindows w{cfg.feed_activity_period_ns, cfg.feed_activity_window_ns};
  if (!w.sampled()) return {};
  if (tracing) {
    say("note", std::string(kEnvFeedActivityPeriodMs) + " ignored: a trace file records every kernel");
    return {};
  }
  return w;
}

// Why a start did not happen: a code of inject_api.h (what gearshift_feed_attach returns) and one line for the
// user.
struct StartError {
  int code;
  std::string why;
};

// True while a trace or feed of this process holds CUPTI. The caller holds g_start_mu.
bool running(State* s) {
  if (s == nullptr) return false;
  std::lock_guard lock(s->stop_mu);
  return !s->cupti_off;
}

// The trace half of a start: clock sampling, the file's header (who wrote it, with which CUPTI) and the Tracer
// that writes it. Returns why the file cannot be written.
std::optional<std::string> open_trace(State& s, const TracerConfig& cfg, const CuptiApi& api) {
  std::string nvml_error;
  if (cfg.sample_period_ns > 0) {
    const char* visible = std::getenv("CUDA_VISIBLE_DEVICES");
    s.clocks = open_nvml_clock_source(visible != nullptr ? std::optional<std::string_view>(visible) : std::nullopt,
                                      &nvml_error);
  }
  if (cfg.sample_period_ns > 0 && !s.clocks) say("note", "no clock sampling: " + nvml_error);
  // Which process of the job this is (`gearshift trace` names its file by rank): -1 / null when absent.
  const feed::Hello who = feed::hello_from_env(s.pid, [](const char* k) { return std::getenv(k); });
  nlohmann::json meta = {{"producer", "gearshift CUPTI tracer"}, {"cupti_library", api.path},
                         {"cupti_api_version", api.version}, {"pid", s.pid}, {"command", command_line()},
                         {"rank", who.rank}, {"local_rank", who.local_rank}, {"world_size", who.world_size},
                         {"cuda_visible_devices", who.cuda_visible_devices ? nlohmann::json(*who.cuda_visible_devices)
                                                                           : nlohmann::json(nullptr)},
                         {"clock_sampling_ms", s.clocks ? cfg.sample_period_ns / 1'000'000 : 0},
                         {"timestamps", "CUPTI (cuptiGetTimestamp), ns"}};
  if (!nvml_error.empty()) meta["clock_sampling_error"] = nvml_error;
  // Under `gearshift trace` each process writes a name of its own, which it renames after the job.
  s.output = cfg.trace_tag.empty() ? claim_output(cfg.output, s.pid)
                                   : staging_trace_path(cfg.output, cfg.trace_tag, s.pid);
  s.config.output = s.output;
  std::string gpu = s.clocks ? s.clocks->device_name(0) : std::string();
  s.tracer = std::make_unique<Tracer>(s.config, &s.launches, "CUPTI", gpu, meta.dump());
  if (!s.tracer->ok()) return "cannot write the trace: " + s.tracer->error();
  return std::nullopt;
}

// The feed half of a start: the runtime's commands (taken from `control_fd`, which is then -1), the launch feed
// on `feed_fd` (owned from here on: fd_taken) and the stream markers that anchor the runtime on the GPU.
void open_feed(State& s, const TracerConfig& cfg, const CuptiApi& api, int feed_fd, int& control_fd,
               bool& fd_taken) {
  // A trace file records every kernel anyway: no commands to read then.
  if (control_fd >= 0 && !s.tracer) {
    s.control = std::make_unique<FeedControl>(control_fd);
    control_fd = -1;
  }
  s.feed = std::make_unique<RuntimeFeed>(feed_fd, [a = &api] { return a->now_ns(); }, cfg.feed_period_ns);
  fd_taken = true;
  // Stream markers need the driver's functions; a trace file records every kernel's activity anyway.
  if (s.tracer) return;
  if (std::optional<CudaDriver> driver = load_cuda_driver(&s.markers_unavailable)) {
    s.markers = std::make_unique<StreamMarkers>();
    s.issuer = std::make_unique<MarkerIssuer>(*driver, *s.markers);
    s.markers->set_period_ns(cfg.feed_marker_ns);
    s.feed->set_markers(s.markers.get());
  } else if (cfg.feed_marker_ns > 0) {
    say("note", "no stream markers: " + s.markers_unavailable);
  }
}

// The one start path, for the driver's injection (settings from the environment) and for
// gearshift_feed_attach (feed-only on a given pipe). `feed_fd` is the runtime's connection, a checked pipe or -1;
// once the feed exists it owns the descriptor (`fd_taken`), before that a refusal leaves it to the caller.
// `control_fd` (the runtime's commands: a duplicate of the connection, or -1) is always ours to close. The caller
// holds g_start_mu. Returns nothing once tracing and/or the feed run.
std::optional<StartError> start(const TracerConfig& cfg, int feed_fd, int control_fd, bool attached,
                                bool& fd_taken) {
  // Closed unless the feed takes it (FeedControl owns it from then on).
  struct ControlFd {
    int fd;
    ~ControlFd() {
      if (fd >= 0) close(fd);
    }
  } control{control_fd};
  fd_taken = false;
  if (cfg.output.empty() && feed_fd < 0)
    return StartError{GEARSHIFT_FEED_BAD_FD,
                      std::string(kEnvOutput) + " is not set (run the program through `gearshift trace -o FILE`)"};
  if (State* old = g_state.load(std::memory_order_acquire); running(old))
    return StartError{GEARSHIFT_FEED_ALREADY_RUNNING,
                      std::string("the gearshift tracer already runs in this process") +
                          (old->attached ? " (attached by gearshift_feed_attach)"
                                         : old->feed ? " with its launch feed (CUDA_INJECTION64_PATH, `gearshift run`)"
                                                     : " (CUDA_INJECTION64_PATH, `gearshift trace`)")};
  SharedCupti& sc = shared_cupti();
  if (!sc.api) return StartError{GEARSHIFT_FEED_NO_CUPTI, "CUPTI unavailable: " + sc.error};
  const CuptiApi& api = *sc.api;
  auto s = std::make_unique<State>();
  s->config = cfg;
  s->api = &api;
  s->pid = getpid();
  s->attached = attached;
  if (CUptiResult r = api.subscribe(&s->subscriber, &on_callback, s.get()); r != CUPTI_SUCCESS) {
    if (r == CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED)
      return StartError{GEARSHIFT_FEED_OTHER_SUBSCRIBER, "another CUPTI client (a profiler) is already subscribed"};
    return StartError{GEARSHIFT_FEED_CUPTI_FAILED, "cuptiSubscribe failed: " + api.describe(r)};
  }
  auto undo = [&](int code, const std::string& why) {
    for (CUpti_ActivityKind k : kRequiredKinds) api.activity_disable(k);
    api.unsubscribe(s->subscriber);
    return StartError{code, why};
  };
  if (!cfg.output.empty())
    if (std::optional<std::string> why = open_trace(*s, cfg, api)) return undo(GEARSHIFT_FEED_CUPTI_FAILED, *why);
  // Before the launch callbacks are on: they read s->feed without a lock.
  if (feed_fd >= 0) open_feed(*s, cfg, api, feed_fd, control.fd, fd_taken);
  s->pool = std::make_unique<BufferPool>(cfg.buffer_bytes, cfg.max_buffers);
  g_state.store(s.get(), std::memory_order_release);  // the buffer callbacks read it from here on
  auto fail = [&](const std::string& note, const std::string& why) {
    if (s->tracer) s->tracer->finish(false, note);
    if (s->feed) s->feed->stop();  // closes feed_fd
    StartError e = undo(GEARSHIFT_FEED_CUPTI_FAILED, why);
    s->cupti_off = true;  // not running: a later start may try again
    s.release();  // leaked deliberately: g_state and CUPTI may still hold its address
    return e;
  };
  if (CUptiResult r = api.activity_register_callbacks(&buffer_requested, &buffer_completed); r != CUPTI_SUCCESS)
    return fail("CUPTI refused activity buffers", "cuptiActivityRegisterCallbacks failed: " + api.describe(r));
  // A trace records every kernel, copy and memset. The feed alone records them while every kernel's activity is
  // recorded; with sampled activity the controller turns kernel activity on and off (window 0: never on), copies
  // and memsets off. The feed's copies are for planning only (`run --auto`'s template): CUPTI refusing them costs
  // the template its copies, not the run.
  const ActivityWindows windows = feed_windows(cfg, s->tracer != nullptr);
  bool copies_refused = false;
  for (CUpti_ActivityKind k : kRequiredKinds) {
    if (!s->tracer && windows.sampled()) continue;
    if (CUptiResult r = api.activity_enable(k); r != CUPTI_SUCCESS) {
      if (!s->tracer && k != CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL) {
        if (!std::exchange(copies_refused, true))
          say("note", "CUPTI refused copy/memset activity (" + api.describe(r) +
                          "); the runtime's template will take the job's copies as idle time");
        continue;
      }
      return fail("CUPTI refused activity kind " + std::to_string(static_cast<int>(k)),
                  "cuptiActivityEnable(" + std::to_string(static_cast<int>(k)) + ") failed: " + api.describe(r));
    }
  }
  // NVTX ranges need NVTX_INJECTION64_PATH (gearshift trace sets it); without it the kind still enables.
  s->marker_enabled = s->tracer && api.activity_enable(CUPTI_ACTIVITY_KIND_MARKER) == CUPTI_SUCCESS;
  for (CUpti_CallbackId cbid : kLaunchCallbacks) {
    if (CUptiResult r = api.enable_callback(1, s->subscriber, CUPTI_CB_DOMAIN_DRIVER_API, cbid); r != CUPTI_SUCCESS)
      return fail("CUPTI refused a launch callback",
                  "cannot enable launch callback " + std::to_string(cbid) + ": " + api.describe(r));
  }
  // The feed also reports synchronizations (the runtime's GPU progress without kernel activity), and the trace
  // records them (replay anchors on them). Best effort: a CUPTI older than the headers may not know a callback
  // id (cuCtxSynchronize_v2 is CUDA 13's); the trace then does not claim to hold every synchronize.
  if (s->feed || s->tracer) {
    const int refused = set_sync_callbacks(*s, true);
    if (s->tracer) s->tracer->set_syncs_recorded(refused == 0);
    if (refused > 0)
      say("note", "CUPTI refused " + std::to_string(refused) + " of " +
                      std::to_string(kSyncDriverCallbacks.size() + kSyncRuntimeCallbacks.size()) +
                      " synchronize callbacks; those synchronizes are not " +
                      (s->feed ? "reported to the runtime" : "in the trace"));
  }
  // Markers stop before any context goes (its page registration may go with it); without that warning, none.
  if (s->issuer && api.enable_callback(1, s->subscriber, CUPTI_CB_DOMAIN_RESOURCE,
                                       CUPTI_CBID_RESOURCE_CONTEXT_DESTROY_STARTING) != CUPTI_SUCCESS) {
    s->markers->disable();
    s->markers_unavailable = "CUPTI refused the context-destruction callback";
  }
  // Our controller thread flushes (cuptiActivityFlushAll(0) returns partly filled buffers too); CUPTI's own
  // periodic flush (cuptiActivityFlushPeriod) returns full buffers only, which left the runtime with GPU
  // progress tens of steps old on an H200.
  const std::int64_t flush_ns =
      s->feed ? (cfg.flush_period_ns > 0 ? std::min(cfg.flush_period_ns, cfg.feed_flush_ns) : cfg.feed_flush_ns)
              : cfg.flush_period_ns;
  State* st = s.release();
  ControllerHooks hooks{[st] { return st->api->now_ns(); }, [st] { st->api->activity_flush_all(0); },
                        [st](const std::string& reason) { stop_tracing(*st, reason, true, false); },
                        /*flush_after_stop=*/static_cast<bool>(st->feed)};
  if (!st->tracer) {  // the feed alone: its kernel activity may be sampled, from the start or on command
    // Copies and memsets only while every kernel is recorded (the warm-up `run --auto` plans from): sampled
    // windows are for GPU progress, which needs none of them.
    hooks.kernel_activity = [st](bool on, bool every_kernel) {
      for (CUpti_ActivityKind k : kRequiredKinds) {
        if (on && (every_kernel || k == CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL)) st->api->activity_enable(k);
        else st->api->activity_disable(k);
      }
    };
    if (st->control) {
      hooks.control = [st]() -> ControlPoll {
        ControlCommand c = st->control->poll();
        if (c.marker_period_ns && st->markers) st->markers->set_period_ns(*c.marker_period_ns);
        return ControlPoll{c.windows, c.off};
      };
      // Nothing will be followed (`run --auto` gave up): callbacks and activity off, so that the job runs as it
      // would without us.
      hooks.off = [st] {
        if (!st->config.quiet) say("note", "gearshift run turned the launch feed off; the program runs on untraced");
        stop_tracing(*st, "feed turned off", true, /*everything=*/true);
      };
    }
  }
  st->controller_owner =
      std::make_unique<Controller>(st->tracer.get(), st->clocks.get(), std::move(hooks), cfg.sample_period_ns,
                                   flush_ns, cfg.duration_ns, windows, /*activity_on=*/!windows.sampled());
  st->controller.store(st->controller_owner.get(), std::memory_order_release);
  // Once per process: at_exit finishes whichever start is current (a detached one is already finished).
  static std::once_flag exit_handler;
  std::call_once(exit_handler, [] { std::atexit(at_exit); });
  return std::nullopt;
}

// The tracer's settings from the environment; a malformed value gets one note and keeps its default.
TracerConfig env_config() {
  std::vector<std::string> warnings;
  TracerConfig cfg = config_from_env([](const char* k) { return std::getenv(k); }, &warnings);
  for (const auto& w : warnings) say("note", w);
  return cfg;
}

// The driver's injection: settings from the environment (`gearshift trace`, `gearshift run`).
void start_from_env() {
  TracerConfig cfg = env_config();
  std::lock_guard lock(g_start_mu);
  const int feed_fd = cfg.runtime_socket.empty() ? -1 : connect_runtime(cfg.runtime_socket);
  if (feed_fd < 0 && !cfg.runtime_socket.empty() && cfg.output.empty()) return;  // its note said it all
  // The commands come back on the same connection; the control reader has a descriptor of its own, so that
  // each closes its own (the feed's shutdown ends the connection for both).
  const int control_fd = feed_fd >= 0 ? fcntl(feed_fd, F_DUPFD_CLOEXEC, 3) : -1;
  bool fd_taken = false;
  if (auto e = start(cfg, feed_fd, control_fd, /*attached=*/false, fd_taken)) warn_untraced(e->why);
  if (feed_fd >= 0 && !fd_taken) close(feed_fd);  // refused: `gearshift run` sees the connection end
}

// The last refusal of gearshift_feed_attach, for gearshift_feed_error(). Leaked: read until the very end.
std::string& feed_error() {
  static auto* e = new std::string();
  return *e;
}

// gearshift_feed_attach: the feed alone (no trace file, whatever GEARSHIFT_TRACE_OUTPUT says), the tuning
// variables (buffer size, flush period, quiet) still from the environment.
int attach(int fd) {
  TracerConfig cfg = env_config();
  cfg.output.clear();
  cfg.runtime_socket.clear();  // the caller's own pipe, whatever the environment names
  std::lock_guard lock(g_start_mu);
  auto refuse = [](int code, const std::string& why) {
    feed_error() = why;
    say("warning", "launch feed not attached: " + why);
    return code;
  };
  if (!is_pipe(fd)) return refuse(GEARSHIFT_FEED_BAD_FD, "fd " + std::to_string(fd) + " is not an open pipe");
  // Our own descriptor: the caller keeps and closes its own (the Python runtime closes its write end at stop).
  const int own = fcntl(fd, F_DUPFD_CLOEXEC, 3);
  if (own < 0) return refuse(GEARSHIFT_FEED_BAD_FD, "cannot duplicate fd " + std::to_string(fd));
  bool fd_taken = false;
  std::optional<StartError> e;
  try {
    e = start(cfg, own, /*control_fd=*/-1, /*attached=*/true, fd_taken);  // the caller's runtime sends no commands
  } catch (const std::exception& x) {
    e = StartError{GEARSHIFT_FEED_CUPTI_FAILED, std::string("the feed failed to start: ") + x.what()};
  }
  if (!e) {
    feed_error().clear();
    return GEARSHIFT_FEED_ATTACHED;
  }
  if (!fd_taken) close(own);  // else the stopped feed closed it
  return refuse(e->code, e->why);
}

// gearshift_feed_detach: ends a feed that attach started (never one of the driver's injection: that one
// belongs to `gearshift run` or `gearshift trace`). The controller goes first, so no periodic flush races the
// last one; stop_tracing then turns CUPTI off, flushes and has the feed write its last lines and close.
int detach() {
  std::lock_guard lock(g_start_mu);
  State* s = g_state.load(std::memory_order_acquire);
  // A forked child has the parent's state but not its threads: nothing of it to stop here.
  if (s == nullptr || !s->attached || s->pid != getpid() || !running(s)) return 0;
  if (Controller* c = s->controller.load(std::memory_order_acquire)) c->shutdown();
  stop_tracing(*s, "detached", true, /*everything=*/true);
  return 1;
}

}  // namespace
}  // namespace gearshift::cupti

// Called by the CUDA driver during cuInit when this library is named by CUDA_INJECTION64_PATH.
GEARSHIFT_EXPORT int InitializeInjection() {
  try {
    gearshift::cupti::start_from_env();
  } catch (const std::exception& e) {
    gearshift::cupti::warn_untraced(std::string("tracer failed to start: ") + e.what());
  } catch (...) {
    gearshift::cupti::warn_untraced("tracer failed to start");
  }
  return 1;  // tracing or not, the driver carries on
}

// Called by NVTX at the first NVTX call when NVTX_INJECTION64_PATH names this library: hand NVTX to CUPTI.
GEARSHIFT_EXPORT int InitializeInjectionNvtx2(void* get_export_table) {
  try {
    auto& sc = gearshift::cupti::shared_cupti();
    if (!sc.api) return 0;  // NVTX then turns its calls into no-ops
    using Fn = int (*)(void*);
    auto fn = reinterpret_cast<Fn>(dlsym(sc.api->handle, "InitializeInjectionNvtx2"));
    return fn != nullptr ? fn(get_export_table) : 0;
  } catch (...) {
    return 0;
  }
}

// On-demand flush for programs that want their records on disk now (ctypes: lib.gearshift_trace_flush()).
GEARSHIFT_EXPORT int gearshift_trace_flush() {
  auto* s = gearshift::cupti::g_state.load(std::memory_order_acquire);
  if (s == nullptr) return 0;
  return s->api->activity_flush_all(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED) == CUPTI_SUCCESS ? 1 : 0;
}

// Ends the trace now (file finished, program runs on untraced); 1 when a trace was running.
GEARSHIFT_EXPORT int gearshift_trace_stop() {
  auto* s = gearshift::cupti::g_state.load(std::memory_order_acquire);
  if (s == nullptr) return 0;
  if (s->tracer == nullptr) return 0;
  // The runtime feed (when on) keeps CUPTI and the controller's periodic flushes running.
  if (!s->feed)
    if (auto* c = s->controller.load(std::memory_order_acquire)) c->shutdown();
  gearshift::cupti::stop_tracing(*s, "stopped by gearshift_trace_stop()", true, false);
  return 1;
}

// Starts the runtime launch feed on a running process (the Python package's enable()): see inject_api.h.
GEARSHIFT_EXPORT int gearshift_feed_attach(int fd) {
  try {
    return gearshift::cupti::attach(fd);
  } catch (...) {
    gearshift::cupti::say("warning", "launch feed not attached: the feed failed to start");
    return GEARSHIFT_FEED_CUPTI_FAILED;
  }
}

// Stops the feed that gearshift_feed_attach started; 1 when one was stopped.
GEARSHIFT_EXPORT int gearshift_feed_detach() {
  try {
    return gearshift::cupti::detach();
  } catch (...) {
    return 0;
  }
}

GEARSHIFT_EXPORT const char* gearshift_feed_error() { return gearshift::cupti::feed_error().c_str(); }
