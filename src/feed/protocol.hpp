// The launch feed's protocol: how every CUDA process of a job (the CUPTI injection library, a test's stand-in
// job) tells `gearshift run` what it launches and what its GPU finished, and how `gearshift run` tells it what to
// record. One owner of the line formats: the writers (injection library) and the readers (`gearshift run`, the
// Python runtime) both use this file. No dependency beyond the standard library: the injection library compiles
// it in.
//
// Job -> gearshift: one event per line, fields separated by one or more spaces, times CLOCK_MONOTONIC ns:
//   H <version> <pid> <rank> <local_rank> <world_size> <visible>   hello: the connection's first line
//   L <cpu_ns> <correlation> <kernel name to the end of the line>
//   C <correlation> <gpu_start_ns> <gpu_end_ns> [<stream> [<device> [<name_id>]]]
//   N <name_id> <kernel name to the end of the line>
//   S <correlation> <enter_ns> <exit_ns>
//   M <correlation> <not_before_ns> <seen_ns>
//   Y <correlation> <gpu_start_ns> <gpu_end_ns> <stream> <device> <bytes> <c|s> <label to the end of the line>
// H names the process: version is kHelloVersion; rank, local rank and world size as the launcher gave them
// (RANK/LOCAL_RANK/WORLD_SIZE, else SLURM_PROCID/SLURM_LOCALID/SLURM_NTASKS, else OMPI_COMM_WORLD_RANK/
// _LOCAL_RANK/_SIZE; -1 when absent); <visible> is "-" when CUDA_VISIBLE_DEVICES is unset, else "=" and its
// value to the end of the line ("=" alone: set and empty, no GPU), so that the reader maps a C line's device
// ordinal to an NVML index (gpu/cuda_visible.hpp).
// C's optional trailing fields are the kernel's CUDA stream id and device ordinal (absent: stream 0, device 0;
// a line without them, the protocol's first form, stays valid). <name_id> names a kernel that its launch's L line
// does not name: a CUDA graph launch has one L line for all its kernels, so each of its kernels' C lines carries
// the id of its own name, given once per process by an N line sent before the first C line that uses it (ids are
// the writer's, unique within one process; a reader of several processes namespaces them as correlations).
// Nothing may follow <name_id>. S is a device or stream
// synchronize the job called (entered, returned): every kernel launched before it had finished by exit_ns. M is a
// stream marker (cupti/stream_marker.hpp) written by the GPU after the kernel launched with that correlation:
// not written yet at not_before_ns, written by seen_ns (the two polls around it), so the kernel ended between.
// Y is a copy (c) or memset (s) the GPU ran, sent while every kernel's activity is recorded: no L line (its
// correlation is the copy call's, or the graph launch's for a copy inside a CUDA graph), <bytes> its size and
// <label> CUPTI's kinds as torch.profiler writes them ("Memcpy HtoD (Pageable -> Device)"). Planning from the
// feed needs them: a step's copies are not idle time (Megatron-LM runs ~1,330 a step; taken as idle, its
// calibration put 569 W instead of 422 W in memory/uncore power, H200,
// bench/results/2026-12-04-s25-template-copies.md). Correlation ids are unique within one process only (CUPTI's are
// 32-bit): a reader of several processes namespaces them (namespaced_correlation) before they meet; N lines' name ids
// likewise.
//
// gearshift -> job (control commands, one per line):
//   A <period_ms> <window_ms>   kernel activity: every kernel (period 0), none (window 0), or only kernels
//                               launched in the first window_ms of every period_ms
//   M <period_us>               stream markers: one every period_us at most; 0: none
//   O                           feed off: the process turns CUPTI off (callbacks, kernel activity, markers),
//                               sends its last lines and closes the feed; the job runs on untraced (`run --auto`
//                               gave up: nothing will be followed, so nothing of the feed may cost the job)
// (ms and µs on the wire; ControlCommand holds them in ns, converted once by parse_control_line and the two
// command writers.)
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>

namespace gearshift::feed {

struct FeedEvent {
  enum class Kind { launch, complete, sync, marker, name, copy };
  Kind kind = Kind::launch;
  std::int64_t correlation = 0;
  std::int64_t cpu_ns = 0;        // launch: CPU time of the launch call
  std::int64_t gpu_start_ns = 0;  // complete; sync: entered; marker: not yet written
  std::int64_t gpu_end_ns = 0;    // complete; sync: returned; marker: written
  std::int32_t stream = 0;        // complete: CUDA stream id (0 when the line omits it)
  std::int32_t device = 0;        // complete: CUDA device ordinal (0 when the line omits it)
  std::int64_t name_id = -1;      // complete: the kernel's own name (N line), -1: its launch names it; name: the id
  std::string_view name;          // launch, name: the kernel name; copy: its label (a view into the parsed line)
  std::int64_t bytes = 0;         // copy: its size, bytes
  bool memset = false;            // copy: a memset (s), not a memcpy (c)
};

// One event line (without its '\n'); nullopt when it is not a valid event: unknown kind (H included), a missing
// or non-numeric field, a negative or out-of-range stream/device, text after the last field of a C, S or M line,
// an S or M line whose second time is before its first, or a Y line whose end is before its start, whose bytes
// are negative, whose kind is not c or s, or that has no label.
std::optional<FeedEvent> parse_feed_line(std::string_view line);

// The writers: each appends one line and its '\n'. A kernel name's newlines (never seen in real symbols) become
// spaces, so that it stays one line.
void append_launch_line(std::string& out, std::int64_t cpu_ns, std::int64_t correlation, std::string_view name);
// `name_id` >= 0 adds the C line's <name_id> field (graph kernels); -1 leaves it out.
void append_completion_line(std::string& out, std::int64_t correlation, std::int64_t start_ns, std::int64_t end_ns,
                            std::uint32_t stream, std::uint32_t device, std::int64_t name_id = -1);
void append_name_line(std::string& out, std::int64_t name_id, std::string_view name);
void append_sync_line(std::string& out, std::int64_t correlation, std::int64_t enter_ns, std::int64_t exit_ns);
void append_marker_line(std::string& out, std::int64_t correlation, std::int64_t not_before_ns, std::int64_t seen_ns);
void append_copy_line(std::string& out, std::int64_t correlation, std::int64_t start_ns, std::int64_t end_ns,
                      std::uint32_t stream, std::uint32_t device, std::int64_t bytes, bool memset,
                      std::string_view label);

inline constexpr int kHelloVersion = 1;

// Who is on the other end of a connection.
struct Hello {
  int version = kHelloVersion;
  std::int64_t pid = 0;
  int rank = -1, local_rank = -1, world_size = -1;  // -1: the launcher gave none
  std::optional<std::string> cuda_visible_devices;  // nullopt: unset
  bool operator==(const Hello&) const = default;
};

void append_hello_line(std::string& out, const Hello& h);
// nullopt when not a hello line: another kind, a missing or non-numeric field, a pid <= 0, a rank field below -1,
// no <visible> field, or another version than kHelloVersion.
std::optional<Hello> parse_hello_line(std::string_view line);

// This process's hello from its environment (`getenv` as std::getenv): the first of the launchers' variables
// that holds a whole non-negative number, per field; CUDA_VISIBLE_DEVICES as it is.
Hello hello_from_env(std::int64_t pid, const std::function<const char*(const char*)>& getenv);

// Correlation ids of connection `connection` in a namespace of their own: the connection in the high 32 bits,
// the process's (32-bit, CUPTI's) id in the low ones.
constexpr std::int64_t namespaced_correlation(std::uint32_t connection, std::int64_t correlation) {
  return static_cast<std::int64_t>((static_cast<std::uint64_t>(connection) << 32) |
                                   (static_cast<std::uint64_t>(correlation) & 0xffff'ffffu));
}

// What the runtime asked for; an empty field: nothing new of that kind.
struct ControlCommand {
  struct Windows {
    std::int64_t period_ns = 0, window_ns = 0;  // the A line's, in ns
  };
  std::optional<Windows> windows;                // A
  std::optional<std::int64_t> marker_period_ns;  // M, in ns
  bool off = false;                              // O
  bool empty() const { return !windows && !marker_period_ns && !off; }
};

// One command line (without '\n'); nullopt when it is not a valid command (negative numbers, a window longer
// than its non-zero period, extra fields, another kind).
std::optional<ControlCommand> parse_control_line(std::string_view line);
// "A <period_ms> <window_ms>\n" for periods in ns (whole ms on the wire: a fraction of a ms is dropped).
std::string activity_command(std::int64_t period_ns, std::int64_t window_ns);
// "M <period_us>\n" for a period in ns (whole µs on the wire).
std::string marker_command(std::int64_t period_ns);
// "O\n": the feed off for good.
std::string off_command();

}  // namespace gearshift::feed
