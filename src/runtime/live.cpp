#include "runtime/live.hpp"

#include <time.h>

#include <algorithm>
#include <limits>

namespace gearshift::runtime {

std::int64_t monotonic_ns() noexcept {
  timespec ts{};
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<std::int64_t>(ts.tv_sec) * 1'000'000'000 + ts.tv_nsec;
}

LiveRuntime::LiveRuntime(const ClockPlan& plan, SchedulerOptions options, Actuator& actuator)
    : act_(actuator), core_(plan.kernels_only(), options) {
  thread_ = std::thread([this] { loop(); });
}

LiveRuntime::~LiveRuntime() { stop(); }

void LiveRuntime::push(Event e) noexcept {
  try {
    std::lock_guard<std::mutex> g(mu_);
    queue_.push_back(std::move(e));
  } catch (...) {
    return;  // out of memory: this event is lost (a lost launch is a missing one to the predictor)
  }
  cv_.notify_one();
}

void LiveRuntime::on_launch(std::string_view name, std::int64_t correlation, std::int64_t cpu_ns) noexcept {
  try {
    push({Event::Kind::launch, correlation, cpu_ns, 0, std::string(name), {}});
  } catch (...) {  // the name's copy
  }
}

void LiveRuntime::on_complete(std::int64_t correlation, std::int64_t start, std::int64_t end) noexcept {
  push({Event::Kind::complete, correlation, start, end, {}, {}});
}

void LiveRuntime::on_sync(std::int64_t correlation, std::int64_t enter, std::int64_t exit) noexcept {
  push({Event::Kind::sync, correlation, enter, exit, {}, {}});
}

void LiveRuntime::on_marker(std::int64_t correlation, std::int64_t not_before, std::int64_t seen) noexcept {
  push({Event::Kind::marker, correlation, not_before, seen, {}, {}});
}

void LiveRuntime::set_anchor_on_completions(bool on) noexcept {
  push({Event::Kind::anchor_on_completions, 0, on ? 1 : 0, 0, {}, {}});
}

void LiveRuntime::set_position_clocks(std::vector<model::ClockPair> clocks) noexcept {
  try {
    Event e{Event::Kind::position_clocks, 0, 0, 0, {}, std::move(clocks)};
    push(std::move(e));
  } catch (...) {  // out of memory: the arm stays as it was
  }
}

void LiveRuntime::handle(Event& e) {
  switch (e.kind) {
    case Event::Kind::position_clocks: core_.set_position_clocks(e.clocks); return;
    case Event::Kind::anchor_on_completions: core_.set_anchor_on_completions(e.a != 0); return;
    case Event::Kind::sync: core_.on_sync(e.correlation, e.a, e.b); return;
    case Event::Kind::marker: core_.on_marker(e.correlation, e.a, e.b); return;
    case Event::Kind::complete:
      core_.on_complete(e.correlation, e.a, e.b);
      fell_back_.store(core_.fell_back(), std::memory_order_relaxed);
      return;
    case Event::Kind::launch: {
      const Alignment a = core_.on_launch(e.name, e.correlation, e.a);
      locked_.store(a.state == PredictorState::locked, std::memory_order_relaxed);
      steps_.store(core_.complete_steps(), std::memory_order_relaxed);
      return;
    }
  }
}

void LiveRuntime::loop() {
  std::vector<Event> batch;
  for (;;) {
    {
      std::unique_lock<std::mutex> g(mu_);
      auto w = core_.next_wakeup_ns();
      auto ready = [&] { return stopping_ || !queue_.empty(); };
      if (w) {
        const std::int64_t wait = std::max<std::int64_t>(0, *w - monotonic_ns());
        cv_.wait_for(g, std::chrono::nanoseconds(wait), ready);
      } else {
        cv_.wait(g, ready);
      }
      batch.swap(queue_);
      if (stopping_ && batch.empty()) break;
    }
    for (auto& e : batch) handle(e);
    batch.clear();
    for (const auto& c : core_.poll(monotonic_ns())) act_.apply(c, core_.plan().size());
    anchored_.store(core_.anchored(), std::memory_order_relaxed);
  }
}

LiveStats LiveRuntime::stop() {
  if (!stopped_) {
    {
      std::lock_guard<std::mutex> g(mu_);
      stopping_ = true;
    }
    cv_.notify_one();
    if (thread_.joinable()) thread_.join();
    act_.restore();
    stopped_ = true;
    stats_ = core_.stats();
  }
  return stats_;
}

}  // namespace gearshift::runtime
