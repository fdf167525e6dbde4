#include "monitor/counter_tick.hpp"

namespace gearshift::monitor {

std::optional<CounterAtTick> read_at_tick(const CounterSource& src, const TickWait& wait, std::string* error) {
  auto fail = [error](const char* why) -> std::optional<CounterAtTick> {
    if (error != nullptr) *error = why;
    return std::nullopt;
  };
  auto read = [&]() -> std::optional<CounterRead> {
    CounterRead r;
    r.t_start = src.now_ns();
    const std::optional<std::uint64_t> mj = src.read_mj();
    r.t_end = src.now_ns();
    if (!mj) return std::nullopt;
    r.cumulative_mj = *mj;
    return r;
  };
  if (wait.stop && wait.stop()) return fail("stopped");
  std::optional<CounterRead> prev = read();
  if (!prev) return fail("the energy counter could not be read");
  const Ns began = prev->t_start;
  std::optional<Tick> loose;  // the latest tick passed over
  for (int passed_over = 0;;) {
    if (wait.max_wait_ns > 0 && src.now_ns() - began >= wait.max_wait_ns) break;
    src.sleep_ns(wait.gap_ns);
    if (wait.stop && wait.stop()) return fail("stopped");
    const std::optional<CounterRead> cur = read();
    if (!cur) return fail("the energy counter could not be read");
    if (const std::optional<Tick> t = detect_tick(*prev, *cur)) {
      if (t->uncertainty() <= wait.max_bracket_ns || ++passed_over > wait.max_passed_over)
        return CounterAtTick{t->time(), t->uncertainty(), static_cast<double>(t->cumulative_mj) * 1e-3, true};
      loose = t;
    }
    prev = cur;
  }
  if (loose)
    return CounterAtTick{loose->time(), loose->uncertainty(), static_cast<double>(loose->cumulative_mj) * 1e-3, true};
  return CounterAtTick{prev->t_start + (prev->t_end - prev->t_start) / 2, wait.period_ns,
                       static_cast<double>(prev->cumulative_mj) * 1e-3, false};
}

std::optional<WindowPower> window_power(const CounterAtTick& from, const CounterAtTick& to) {
  const Ns window = to.t_ns - from.t_ns;
  if (window <= 0 || !(to.j > from.j)) return std::nullopt;
  const double s = static_cast<double>(window) * 1e-9;
  const double err = 0.5 * static_cast<double>(from.uncertainty_ns + to.uncertainty_ns) / static_cast<double>(window);
  return WindowPower{(to.j - from.j) / s, err, s, from.located && to.located};
}

}  // namespace gearshift::monitor
