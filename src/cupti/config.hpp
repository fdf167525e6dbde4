// Options of the injected tracer. `gearshift trace` passes them by environment (the traced program's own
// command line is not ours to touch); config_from_env() reads them back inside the traced process.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace gearshift::cupti {

inline constexpr const char* kEnvOutput = "GEARSHIFT_TRACE_OUTPUT";         // gearshift trace file (required)
inline constexpr const char* kEnvChrome = "GEARSHIFT_TRACE_CHROME";  // retired: a note says `gearshift trace --chrome`
inline constexpr const char* kEnvSteps = "GEARSHIFT_TRACE_STEPS";           // stop after N step ranges
inline constexpr const char* kEnvDuration = "GEARSHIFT_TRACE_DURATION_S";   // stop after S seconds
inline constexpr const char* kEnvBufferMb = "GEARSHIFT_TRACE_BUFFER_MB";    // activity buffer size, MiB
inline constexpr const char* kEnvMaxBuffers = "GEARSHIFT_TRACE_MAX_BUFFERS";  // cap on buffers in use
inline constexpr const char* kEnvSampleMs = "GEARSHIFT_TRACE_SAMPLE_MS";    // clock sampling period, 0 = off
inline constexpr const char* kEnvFlushMs = "GEARSHIFT_TRACE_FLUSH_MS";      // periodic flush, 0 = off
inline constexpr const char* kEnvMaxRecords = "GEARSHIFT_TRACE_MAX_RECORDS";  // stop after this many records
inline constexpr const char* kEnvCuptiLibrary = "GEARSHIFT_CUPTI_LIBRARY";  // libcupti.so to load
inline constexpr const char* kEnvQuiet = "GEARSHIFT_TRACE_QUIET";           // 1: no summary line at exit
inline constexpr const char* kEnvAllRanges = "GEARSHIFT_TRACE_ALL_RANGES";  // 1: every NVTX range + graph spans
// Set by `gearshift run`: its launch feed's socket (feed/socket.hpp's kEnvSocket, GEARSHIFT_RUNTIME_SOCKET; the
// protocol in feed/protocol.hpp). Every CUDA process of the job that loads the library connects to it.
// Set by `gearshift trace`: every CUDA process writes its own file, staging_trace_path(output, tag, pid), which
// `gearshift trace` renames once the job ended (multi-process file naming: docs/trace-format.md).
inline constexpr const char* kEnvTraceTag = "GEARSHIFT_TRACE_PROCESS_TAG";
// The runtime feed's tuning (no trace file only; a trace records every kernel and keeps its own flush period):
inline constexpr const char* kEnvFeedFlushMs = "GEARSHIFT_FEED_FLUSH_MS";  // flush period, ms (default 10)
inline constexpr const char* kEnvFeedPeriodUs = "GEARSHIFT_FEED_PERIOD_US";  // writer period, µs (default 500)
// Sampled kernel activity: completions only for kernels launched in the first WINDOW ms of every PERIOD ms.
inline constexpr const char* kEnvFeedActivityPeriodMs = "GEARSHIFT_FEED_ACTIVITY_PERIOD_MS";  // 0: every kernel
inline constexpr const char* kEnvFeedActivityWindowMs = "GEARSHIFT_FEED_ACTIVITY_WINDOW_MS";  // 0: none
// Stream markers (stream_marker.hpp): one after a kernel launched at least this long after the last was seen.
inline constexpr const char* kEnvFeedMarkerUs = "GEARSHIFT_FEED_MARKER_US";  // µs; 0: none (default)

// The times in ns: config_from_env converts the variables' s, ms and µs once.
struct TracerConfig {
  std::string output;                 // empty: tracing is off
  std::int64_t steps = 0;             // 0: no step limit
  std::int64_t duration_ns = 0;       // 0: no time limit
  std::size_t buffer_bytes = 4u << 20;  // 4 MiB
  std::size_t max_buffers = 32;       // 128 MiB at most in CUPTI's hands
  std::int64_t sample_period_ns = 10'000'000;   // 0: no clock sampling
  std::int64_t flush_period_ns = 1'000'000'000;  // 0: no periodic flush
  std::uint64_t max_records = 50'000'000;
  std::string cupti_library;          // empty: search (see cupti_api.hpp)
  bool quiet = false;
  // Markers written: by default only step ranges, because readers of the format (iteration detection) take
  // every marker of a trace as a step boundary; with all_ranges, also library ranges (CUB, NCCL, user NVTX)
  // and "cuda.graph_launch#G" GPU spans.
  bool all_ranges = false;
  std::string runtime_socket;         // non-empty: connect there and write the runtime's launch feed
  std::string trace_tag;              // non-empty: write staging_trace_path(output, trace_tag, pid)
  // How often CUPTI hands completed kernels to the feed: the runtime anchors its estimate of GPU progress on
  // them, so staleness costs in-time accuracy.
  std::int64_t feed_flush_ns = 10'000'000;
  // How often the feed's writer thread drains the launch queue into the pipe: the runtime sees a launch at
  // most this late.
  std::int64_t feed_period_ns = 500'000;
  // Sampled kernel activity for the feed (CUPTI's per-kernel cost only inside the windows): on for the first
  // window of every period; period 0 = every kernel; window 0 < period = no kernel activity at all
  // (measures the launch callbacks alone; the runtime then has no GPU progress).
  std::int64_t feed_activity_period_ns = 0;
  std::int64_t feed_activity_window_ns = 0;
  // Stream markers for the feed, their period (0: none; the runtime may turn them on over the control pipe).
  std::int64_t feed_marker_ns = 0;
};

// Reads the variables above through `getenv`. A malformed value keeps its default and adds a warning.
TracerConfig config_from_env(const std::function<const char*(const char*)>& getenv,
                             std::vector<std::string>* warnings);

// `path` with ".<tag>" before its extension (.jsonl.gz, .json.gz, .jsonl, .json, .gz; none: at the end):
// ("t.jsonl.gz", "rank1") -> "t.rank1.jsonl.gz".
std::string insert_before_extension(const std::string& path, const std::string& tag);

// The file one process of a `gearshift trace` run writes: `output` with ".gs-<tag>.pid<pid>" before its
// extension. A tag is letters and digits only, so that a reader tells these files apart (trace_tag_pid).
std::string staging_trace_path(const std::string& output, const std::string& tag, long pid);
// The pid in a file name staging_trace_path(output, tag, pid) made; -1 when `name` is no such name.
long staging_trace_pid(const std::string& output, const std::string& tag, const std::string& path);

// The step-range names counted for --steps (NVTX ranges as torch.cuda.nvtx.range_push emits them).
bool is_step_marker(std::string_view name);

}  // namespace gearshift::cupti
