#include "runtime/live.hpp"

#include <time.h>

#include <algorithm>
#include <limits>

namespace gearshift::runtime {

namespace {
constexpr std::size_t kRing = 1 << 16;  // correlations remembered until their activity record arrives
constexpr std::size_t kRecent = 256;     // launches a synchronize may be queued behind (other threads' launches)
}

std::int64_t monotonic_ns() noexcept {
  timespec ts{};
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<std::int64_t>(ts.tv_sec) * 1'000'000'000 + ts.tv_nsec;
}

namespace {
std::vector<std::string> names_of(const ClockPlan& p) {
  std::vector<std::string> v;
  for (const auto& x : p.positions) v.push_back(x.name);
  return v;
}
}  // namespace

LiveRuntime::LiveRuntime(const ClockPlan& plan, SchedulerOptions options, Actuator& actuator)
    : plan_(plan.kernels_only()),
      act_(actuator),
      pred_(names_of(plan_)),
      sched_(plan_, options),
      latency_ns_(options.switch_latency_ns),
      corr_pos_(kRing, {-1, -1}),
      landings_{{-std::numeric_limits<double>::infinity(), plan_.default_clocks}} {
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
    push({Event::Kind::launch, correlation, cpu_ns, 0, std::string(name)});
  } catch (...) {  // the name's copy
  }
}

void LiveRuntime::on_complete(std::int64_t correlation, std::int64_t start, std::int64_t end) noexcept {
  push({Event::Kind::complete, correlation, start, end, {}});
}

void LiveRuntime::on_sync(std::int64_t correlation, std::int64_t enter, std::int64_t exit) noexcept {
  push({Event::Kind::sync, correlation, enter, exit, {}});
}

void LiveRuntime::on_marker(std::int64_t correlation, std::int64_t not_before, std::int64_t seen) noexcept {
  push({Event::Kind::marker, correlation, not_before, seen, {}});
}

void LiveRuntime::set_anchor_on_completions(bool on) noexcept {
  push({Event::Kind::anchor_on_completions, 0, on ? 1 : 0, 0, {}});
}

void LiveRuntime::handle(Event& e) {
  const auto n = static_cast<std::int64_t>(pred_.size());
  if (e.kind == Event::Kind::anchor_on_completions) {
    sched_.set_anchor_on_completions(e.a != 0);
    return;
  }
  if (e.kind == Event::Kind::sync) {
    ++stats_.syncs;
    std::int64_t abs = -1;
    for (auto it = recent_.rbegin(); it != recent_.rend(); ++it)
      if (it->first < e.correlation) {
        abs = it->second;
        break;
      }
    sched_.on_sync(abs, e.a, e.b);
    return;
  }
  if (e.kind == Event::Kind::launch) {
    const std::int64_t expected = pred_.next_position();
    Alignment a = pred_.observe(e.name);
    const bool locked = a.state == PredictorState::locked;
    locked_.store(locked, std::memory_order_relaxed);
    sched_.on_launch(a.position, locked, e.a);
    if (recent_.size() >= kRecent) recent_.erase(recent_.begin(), recent_.begin() + kRecent / 2);
    recent_.emplace_back(e.correlation, locked && (a.matched || a.substituted) ? a.position : -1);
    ++stats_.launches;
    if (a.state == PredictorState::locked) {
      if (first_abs_ < 0) first_abs_ = a.position;
      last_abs_ = std::max(last_abs_, a.position);
    }
    if (expected >= 0 && first_abs_ >= 0 && expected >= first_abs_ + n) {
      ++stats_.scored;
      if ((a.matched || a.substituted) && a.position == expected) ++stats_.predicted;
    }
    if (e.correlation >= 0)
      corr_pos_[static_cast<std::size_t>(e.correlation) % kRing] = {e.correlation,
                                                                     a.matched || a.substituted ? a.position : -1};
    return;
  }
  auto& slot = corr_pos_[static_cast<std::size_t>(std::max<std::int64_t>(e.correlation, 0)) % kRing];
  if (e.kind == Event::Kind::marker) ++stats_.markers;
  if (slot.first != e.correlation || slot.second < 0) return;
  const std::int64_t abs = slot.second;
  if (e.kind == Event::Kind::marker) {
    sched_.on_marker(abs, e.a, e.b);
    return;
  }
  sched_.on_complete(abs, e.a, e.b);
  if (first_abs_ >= 0 && abs >= first_abs_ + n && e.b > e.a) {
    const auto& want = plan_.positions[static_cast<std::size_t>(abs % n)].clocks;
    const double s = static_cast<double>(e.a), t = static_cast<double>(e.b);
    stats_.kernel_ns += t - s;
    auto it = std::upper_bound(landings_.begin(), landings_.end(), s, [](double x, const auto& seg) { return x < seg.first; });
    for (auto k = static_cast<std::size_t>(it - landings_.begin()) - 1; k < landings_.size() && landings_[k].first < t; ++k) {
      const double lo = std::max(s, landings_[k].first);
      const double hi = k + 1 < landings_.size() ? std::min(t, landings_[k + 1].first) : t;
      if (hi > lo && landings_[k].second == want) stats_.in_time_ns += hi - lo;
    }
  }
}

void LiveRuntime::loop() {
  std::vector<Event> batch;
  for (;;) {
    {
      std::unique_lock<std::mutex> g(mu_);
      auto w = sched_.next_wakeup_ns();
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
    const std::int64_t now = monotonic_ns();
    for (const auto& c : sched_.poll(now)) {
      act_.apply(c, plan_.size());
      landings_.emplace_back(static_cast<double>(now) + latency_ns_, c.clocks);
    }
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
    const auto n = static_cast<std::int64_t>(pred_.size());
    const auto& st = sched_.stats();
    stats_.changes = st.issued;
    stats_.dropped = st.dropped;
    stats_.merged = st.merged;
    stats_.late = st.late;
    stats_.losses = pred_.losses();
    stats_.steps = first_abs_ < 0 ? 0 : static_cast<std::uint64_t>(last_abs_ / n - first_abs_ / n + 1);
  }
  return stats_;
}

}  // namespace gearshift::runtime
