// Measured verification of a plan on the live job (`gearshift run`, with --plan or --auto): the closed loop of
// verify/controller.hpp driven by the job's own steps and the GPU's energy counter. The runtime's count of whole
// steps (LiveRuntime::steps(), read on the feed reader) cuts the blocks; a thread of its own reads NVML's energy
// counter at its ticks (monitor/counter_tick.hpp, through RunEnergy::counter) so that each block's energy is the
// counter's own between two ticks inside it. With --apply each block's clocks are set in the runtime
// (LiveRuntime::set_position_clocks); in a dry run nothing is touched and the blocks are intended arms, so the
// figures measure the job's noise floor (an A/A test): what slowdown its steps can resolve. docs/verification.md.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <fstream>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "monitor/counter_tick.hpp"
#include "monitor/run_energy.hpp"
#include "runtime/clock_plan.hpp"
#include "verify/clock_watch.hpp"
#include "verify/controller.hpp"
#include "verify/step_cycle.hpp"

namespace gearshift::runtime {
class LiveRuntime;
class Session;
}

namespace gearshift::service {

struct VerifyOptions {
  bool enabled = true;
  double budget = 0.005;            // step-time slowdown allowed, fraction
  std::uint64_t block_steps = 5;    // measured steps per block, at least
  double block_seconds = 0;         // and at least this long, s; 0: 20 periods of the energy counter
  std::string log_path;             // --verify-log: one JSON line per block and per decision ("" none)
};

// The energy counter at its next tick (RunEnergy::counter(true)); nullopt without one.
using CounterRead = std::function<std::optional<monitor::CounterAtTick>()>;
// The GPU's SM clock and clock-event reasons now (RunEnergy::clocks()); nullopt when not read. Read after each
// counter tick, so that a block whose clocks someone else changed is found (verify/clock_watch.hpp).
using ClocksRead = std::function<std::optional<verify::ClockSample>()>;
// RunEnergy::clocks() as a ClocksRead; `energy` must outlive it.
ClocksRead clocks_read(const monitor::RunEnergy& energy);

class LiveVerifier {
 public:
  // `plan`: the plan as the runtime follows it (kernels only); `sm_clocks`/`mem_clocks`: the GPU's supported clocks
  // (ascending; empty: no snapping); `counter_period_ns`: the energy counter's tick period (blocks last at least
  // 20 of them); `apply`: set each block's clocks in the runtime; `clocks`: NVML's clock state, read at each tick
  // (none: clocks changed by someone else go unseen). Throws std::runtime_error when the log cannot be opened.
  LiveVerifier(const VerifyOptions& o, const runtime::ClockPlan& plan, std::vector<int> sm_clocks,
               std::vector<int> mem_clocks, std::int64_t counter_period_ns, bool apply, CounterRead counter,
               ClocksRead clocks = {});
  ~LiveVerifier();
  LiveVerifier(const LiveVerifier&) = delete;
  LiveVerifier& operator=(const LiveVerifier&) = delete;

  // The entry of both faces (`gearshift run`'s feed reader after each event, `gearshift.torch`'s poller every ms):
  // the session's live runtime's step count now, and, where a step ended, a halt where the session applies clocks
  // and NVML stopped taking them (checked only there: it takes the actuator's lock).
  void poll(runtime::Session& session, std::int64_t steady_ns);
  // Stops the counter thread; the block in progress is left out (said in the summary).
  void stop();
  // Ends the blocks for good (feed reader): the quad in progress is left out, `why` is said in the summary. For a
  // GPU that stopped taking clock changes (lost, or NVML refusing): its later blocks would compare two arms that
  // ran the same clocks.
  void halt(const std::string& why);
  // Lines for the run's summary, measured figures first.
  std::string summary() const;
  // The measured figures as Prometheus gauges (text exposition format; `run --prometheus`), as of the last block.
  // Any thread.
  std::string prometheus_text() const;
  // Each block's start (steady ns when its clocks were requested) and its rung (1 the plan, 0 the baseline), for
  // `run --timeline`. After stop().
  const std::vector<std::pair<std::int64_t, double>>& arm_track() const { return arm_points_; }
  // Whether the loop still needs the job's steps before its first verdict (with apply only): a one-pair plan's feed
  // is turned off only once this is false; steady-state quads then stop with the feed.
  bool needs_steps() const;

 private:
  // A step count seen (`steady_ns`: std::chrono::steady_clock now; `rt`: where a block's clocks are set with apply).
  void on_live_event(std::int64_t steady_ns, std::uint64_t steps, runtime::LiveRuntime& rt, bool fell_back);
  void counter_loop();
  verify::BlockResult close_block(std::int64_t end_ns);
  // The clock reads inside the measured steps of the block ending at `end_ns`.
  std::vector<verify::ClockSample> block_clocks(std::int64_t end_ns) const;
  // What gearshift held in a block of `arm` at `alpha` (verify/clock_watch.hpp).
  verify::BlockHold hold_of(verify::Arm arm, double alpha) const;
  void log(const std::string& json_line);
  void set_arm(runtime::LiveRuntime& rt, std::int64_t now);
  void update_gauges();  // the feed reader, after each block

  VerifyOptions o_;
  verify::Controller ctl_;
  bool apply_;
  CounterRead counter_;
  ClocksRead clocks_;
  std::int64_t period_ns_;
  // Counter ticks (steady ns, J), appended by the counter thread.
  mutable std::mutex mu_;
  std::vector<std::pair<std::int64_t, double>> ticks_;
  std::vector<std::pair<std::int64_t, verify::ClockSample>> clock_reads_;  // (steady ns, read), by the same thread
  std::string counter_error_;
  std::atomic<bool> stopping_{false};
  std::thread thread_;
  // The feed reader's block state.
  std::optional<std::uint64_t> last_steps_;
  std::int64_t last_boundary_ns_ = -1;
  std::uint64_t settle_left_ = 0;
  std::int64_t measured_from_ns_ = -1;
  std::vector<double> step_s_;
  verify::StepCycle cycle_;          // the job's own cycle of slow steps: blocks span whole ones once found
  bool arm_set_ = false;
  std::uint64_t partial_steps_ = 0;  // steps of the block the job ended in
  std::string stopped_why_;          // why verification stopped early ("" none)
  verify::ClockWatch watch_;
  bool foreign_ = false;             // someone else changed the clocks: with apply, the default clocks since
  std::ofstream log_;
  std::vector<std::string> lines_;   // the decisions, for the summary
  std::vector<std::pair<std::int64_t, double>> arm_points_;  // arm_track()
  std::string gauges_;  // prometheus_text(), under mu_
};

// The verifier of a plan the runtime follows (`plan`: as given to the session; its kernel positions are followed),
// with the GPU spec's supported clocks and counter period (100 ms and no snapping for a spec not known, said to
// `sink`); nullptr when `o.enabled` is false, or when it cannot start (its log cannot be opened: said to `sink`).
// Never throws: `gearshift run --auto` calls it on its planner's thread.
std::unique_ptr<LiveVerifier> make_live_verifier(const VerifyOptions& o, const runtime::ClockPlan& plan, bool apply,
                                                 CounterRead counter, const std::function<void(std::string_view)>& sink,
                                                 ClocksRead clocks = {});

}  // namespace gearshift::service
