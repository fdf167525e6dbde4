#include "monitor/sampler.hpp"

#include <algorithm>
#include <cmath>
#include <deque>
#include <stdexcept>

#include <fmt/core.h>

namespace gearshift::monitor {

Ns now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

struct Sampler::GpuState {
  gpu::Device device;
  std::string label;  // "GPU 0"
  bool counter_known = false, has_counter = false;
  bool power_known = false, has_power = false, power_from_average = false;
  bool lost = false;
  Ns lost_at = 0;
  Ns started = 0;
  Ns read_ns = 0;  // duration of the last counter read: a step is located to about two reads plus the gap
  CounterUnwrapper unwrap;
  std::optional<std::uint64_t> last_raw;
  std::deque<CounterRead> reads;  // recent counter reads
  std::deque<Tick> ticks;         // recent located steps
  PowerIntegrator power{8192};
  GpuSample last_full;
  explicit GpuState(gpu::Device d) : device(std::move(d)) {}
};

struct Sampler::EdgeValue {
  bool done = false;
  std::optional<double> counter_mj;  // cumulative scale
  bool counter_located = false;      // from a located tick (else from plain reads)
  std::optional<double> integral_j;
  std::optional<double> power_w;  // power around the edge, W (peak of a window too short for any sample)
  bool lost = false;
};

struct Sampler::Edge {
  Ns t = 0;
  std::vector<EdgeValue> gpus;
  bool done = false;
};

struct Sampler::Window {
  std::string name;
  std::shared_ptr<Edge> begin, end;
  std::vector<std::optional<double>> peak_w;
};

namespace {
constexpr std::size_t kKeepReads = 512;
constexpr std::size_t kKeepTicks = 256;

bool is_lost(const gpu::NvmlError& e) { return e.code == gpu::NvmlErrc::kGpuLost; }

// Linear interpolation of plain counter reads at t (fallback when no step could be located).
std::optional<double> interpolate_reads(const std::deque<CounterRead>& reads, Ns t) {
  if (reads.empty()) return std::nullopt;
  auto mid = [](const CounterRead& r) { return r.t_start + (r.t_end - r.t_start) / 2; };
  const CounterRead* before = nullptr;
  const CounterRead* after = nullptr;
  for (const auto& r : reads) {
    if (mid(r) <= t) before = &r;
    if (mid(r) >= t && !after) after = &r;
  }
  if (!before) return static_cast<double>(after->cumulative_mj);
  if (!after || after == before) return static_cast<double>(before->cumulative_mj);
  double span = static_cast<double>(mid(*after) - mid(*before));
  double x = static_cast<double>(t - mid(*before));
  return static_cast<double>(before->cumulative_mj) +
         static_cast<double>(after->cumulative_mj - before->cumulative_mj) * (span > 0 ? x / span : 0);
}
}  // namespace

Sampler::Sampler(std::vector<gpu::Device> devices, SamplerOptions options) : opt_(std::move(options)) {
  if (devices.empty()) throw std::invalid_argument("sampler: no GPU to sample");
  for (auto& d : devices) {
    auto info = d.info();
    gpu::DeviceInfo di;
    di.index = d.index();
    if (info) di = info.value();
    infos_.push_back(di);
    auto g = std::make_unique<GpuState>(std::move(d));
    g->label = "GPU " + std::to_string(di.index);
    gpus_.push_back(std::move(g));
  }
  thread_ = std::thread([this] { run(); });
}

Sampler::~Sampler() {
  {
    std::lock_guard<std::mutex> lk(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

void Sampler::note(const std::string& text) {
  if (opt_.on_note) opt_.on_note(text);
}

void Sampler::read_gpu(GpuState& g, bool full, bool burst, std::vector<GpuSample>& out) {
  if (g.lost) return;
  auto mark_lost = [&](const gpu::NvmlError& e) {
    g.lost = true;
    g.lost_at = now_ns();
    note(fmt::format("{} lost {:.1f} s into monitoring ({}); its figures cover the time before", g.label,
                     static_cast<double>(g.lost_at - g.started) * 1e-9, e.message));
  };
  const Ns counter_every = std::chrono::nanoseconds(opt_.counter_interval).count();
  const bool counter_due = burst || g.reads.empty() || now_ns() - g.reads.back().t_start >= counter_every;
  if (!g.counter_known || (g.has_counter && counter_due)) {
    Ns a = now_ns();
    auto e = g.device.total_energy_mj();
    Ns b = now_ns();
    if (!e) {
      if (is_lost(e.error())) return mark_lost(e.error());
      if (!g.counter_known) {
        note(fmt::format("{} has no usable energy counter ({}); integrating instant power instead (approximate)",
                         g.label, e.error().message));
      }
      g.counter_known = true;
      g.has_counter = false;
    } else {
      g.counter_known = g.has_counter = true;
      int wraps_before = g.unwrap.wraps();
      g.read_ns = b - a;
      CounterRead r{a, b, g.unwrap.add(e.value())};
      if (g.unwrap.wraps() != wraps_before) {
        note(fmt::format("{} energy counter wrapped around (raw {} mJ); continuing across the wrap", g.label,
                         e.value()));
      }
      if (!g.reads.empty()) {
        if (auto t = detect_tick(g.reads.back(), r)) {
          g.ticks.push_back(*t);
          if (g.ticks.size() > kKeepTicks) g.ticks.pop_front();
        }
      }
      g.reads.push_back(r);
      if (g.reads.size() > kKeepReads) g.reads.pop_front();
      g.last_raw = e.value();
    }
  }
  if (!g.power_known || g.has_power) {
    Ns t = now_ns();
    auto p = g.power_from_average ? g.device.average_power_w() : g.device.instant_power_w();
    if (!p && !g.power_known && !is_lost(p.error())) {
      g.power_from_average = true;  // older drivers lack the instant-power field
      p = g.device.average_power_w();
    }
    if (!p) {
      if (is_lost(p.error())) return mark_lost(p.error());
      if (!g.power_known) note(fmt::format("{} reports no power ({})", g.label, p.error().message));
      g.power_known = true;
      g.has_power = false;
    } else {
      g.power_known = g.has_power = true;
      g.power.add(t, p.value());
    }
  }
  if (!full) return;
  GpuSample s;
  s.gpu = g.device.index();
  s.t = now_ns();
  s.energy_counter_mj = g.has_counter ? g.last_raw : std::nullopt;
  if (g.has_counter && !g.reads.empty()) {
    // Last counter read plus the power integral since (the counter is read sparsely between edges).
    const CounterRead& r = g.reads.back();
    double since = 0;
    auto now_i = g.power.integral_at(s.t), then_i = g.power.integral_at(r.t_start + (r.t_end - r.t_start) / 2);
    if (now_i && then_i) since = *now_i - *then_i;
    s.energy_j = static_cast<double>(r.cumulative_mj) * 1e-3 + since;
  } else if (g.has_power && !g.power.points().empty()) {
    s.energy_j = g.power.points().back().integral_j;
  }
  if (g.has_power && !g.power.points().empty()) s.power_w = g.power.points().back().watts;
  // Slow fields: a failure other than a lost GPU just leaves the field empty.
  auto keep = [&](auto r, auto& field) {
    if (r) field = r.value();
    else if (is_lost(r.error())) mark_lost(r.error());
  };
  keep(g.device.sm_clock_mhz(), s.sm_clock_mhz);
  if (g.lost) return;
  keep(g.device.mem_clock_mhz(), s.mem_clock_mhz);
  if (g.lost) return;
  keep(g.device.temperature_c(), s.temperature_c);
  if (g.lost) return;
  auto reasons = g.device.clock_event_reasons();
  if (reasons) s.clock_event_reasons = reasons.value().bits;
  else if (is_lost(reasons.error())) return mark_lost(reasons.error());
  out.push_back(s);
}

void Sampler::resolve_edges(Ns now) {
  const Ns timeout = 3 * std::chrono::nanoseconds(opt_.counter_period).count() +
                     std::chrono::nanoseconds(opt_.interval).count() + 50'000'000;
  const Ns precise_floor = std::chrono::nanoseconds(opt_.precise).count();
  const Ns burst = std::chrono::nanoseconds(opt_.burst_gap).count();
  const Ns interval = std::chrono::nanoseconds(opt_.interval).count();
  for (auto& edge : pending_) {
    bool all = true;
    for (std::size_t i = 0; i < gpus_.size(); ++i) {
      GpuState& g = *gpus_[i];
      EdgeValue& v = edge->gpus[i];
      if (v.done) continue;
      bool counter_ok = !g.counter_known || !g.has_counter || v.counter_mj.has_value();
      if (g.counter_known && g.has_counter && !v.counter_mj) {
        // Slow reads (≈4 ms on H200) widen the bracket of a step: allow three reads plus the gap.
        const Ns precise = std::max(precise_floor, 3 * g.read_ns + burst);
        for (const Tick& tk : g.ticks) {
          if (tk.t_lo >= edge->t && tk.uncertainty() <= precise) {
            double p = g.power.mean_power(edge->t, tk.time()).value_or(0.0);
            v.counter_mj = energy_at(tk, p, edge->t);
            v.counter_located = true;
            break;
          }
        }
        if (!v.counter_mj && (now - edge->t > timeout || g.lost)) v.counter_mj = interpolate_reads(g.reads, edge->t);
        counter_ok = v.counter_mj.has_value() || g.lost;
      }
      bool power_ok = !g.power_known || !g.has_power;
      if (!power_ok) {
        const auto& pts = g.power.points();
        if (!pts.empty() && (pts.back().t >= edge->t || g.lost)) {
          v.integral_j = g.power.integral_at(g.lost ? std::min(edge->t, g.lost_at) : edge->t);
          v.power_w = g.power.mean_power(edge->t - interval, edge->t + interval);
          power_ok = true;
        }
      }
      bool known = g.counter_known && g.power_known;
      if ((known && counter_ok && power_ok) || g.lost) {
        v.lost = g.lost;
        v.done = true;
      } else {
        all = false;
      }
    }
    edge->done = all;
  }
  std::erase_if(pending_, [](const auto& e) { return e->done; });
}

void Sampler::run() {
  const Ns interval = std::chrono::nanoseconds(opt_.interval).count();
  const Ns burst = std::chrono::nanoseconds(opt_.burst_gap).count();
  for (auto& g : gpus_) g->started = now_ns();
  Ns next_full = now_ns();
  std::vector<GpuSample> full_samples;
  for (;;) {
    {
      std::lock_guard<std::mutex> lk(mu_);
      if (stop_) break;
    }
    Ns t = now_ns();
    bool full = t >= next_full;
    bool edges_open;
    {
      std::lock_guard<std::mutex> lk(mu_);
      edges_open = !pending_.empty();
    }
    full_samples.clear();
    for (auto& g : gpus_) read_gpu(*g, full, edges_open, full_samples);  // NVML calls, without the lock
    if (full) {
      next_full += interval;
      if (next_full < t) next_full = t + interval;  // fell behind (slow reads): skip, don't burst
    }
    bool pending;
    {
      std::lock_guard<std::mutex> lk(mu_);
      for (const auto& s : full_samples) {
        if (latest_.size() <= s.gpu) latest_.resize(s.gpu + 1);
        latest_[s.gpu] = s;
      }
      // Peaks of open windows from the new power points.
      for (auto& [name, w] : windows_) {
        for (std::size_t i = 0; i < gpus_.size(); ++i) {
          const auto& pts = gpus_[i]->power.points();
          if (pts.empty()) continue;
          const PowerPoint& p = pts.back();
          if (p.t < w->begin->t || (w->end && p.t > w->end->t)) continue;
          if (!w->peak_w[i] || p.watts > *w->peak_w[i]) w->peak_w[i] = p.watts;
        }
      }
      resolve_edges(now_ns());
      pending = !pending_.empty();
    }
    done_cv_.notify_all();
    if (opt_.on_sample) {
      for (const auto& s : full_samples) opt_.on_sample(s);
    }
    Ns wake = pending ? now_ns() + burst : next_full;
    std::unique_lock<std::mutex> lk(mu_);
    cv_.wait_until(lk, std::chrono::steady_clock::time_point(std::chrono::nanoseconds(wake)),
                   [&] { return stop_ || poke_; });
    poke_ = false;
  }
  // Stop: resolve whatever is pending with what was read, so no end() waits forever.
  std::lock_guard<std::mutex> lk(mu_);
  for (auto& e : pending_) {
    for (std::size_t i = 0; i < gpus_.size(); ++i) {
      EdgeValue& v = e->gpus[i];
      if (v.done) continue;
      if (!v.counter_mj) v.counter_mj = interpolate_reads(gpus_[i]->reads, e->t);
      if (!v.integral_j) v.integral_j = gpus_[i]->power.integral_at(e->t);
      v.done = true;
    }
    e->done = true;
  }
  pending_.clear();
  done_cv_.notify_all();
}

void Sampler::begin(const std::string& name) {
  {
    std::lock_guard<std::mutex> lk(mu_);
    if (windows_.count(name)) throw std::invalid_argument("window '" + name + "' is already open");
    auto w = std::make_unique<Window>();
    w->name = name;
    w->begin = std::make_shared<Edge>();
    w->begin->t = now_ns();
    w->begin->gpus.resize(gpus_.size());
    w->peak_w.resize(gpus_.size());
    pending_.push_back(w->begin);
    windows_[name] = std::move(w);
    poke_ = true;
  }
  cv_.notify_all();
}

WindowResult Sampler::end(const std::string& name) {
  std::unique_lock<std::mutex> lk(mu_);
  auto it = windows_.find(name);
  if (it == windows_.end() || it->second->end) throw std::invalid_argument("window '" + name + "' is not open");
  Window& w = *it->second;
  w.end = std::make_shared<Edge>();
  w.end->t = now_ns();
  w.end->gpus.resize(gpus_.size());
  pending_.push_back(w.end);
  poke_ = true;
  cv_.notify_all();
  done_cv_.wait(lk, [&] { return (w.begin->done && w.end->done) || stop_; });
  WindowResult r;
  r.name = name;
  r.begin_ns = w.begin->t;
  r.end_ns = w.end->t;
  r.time_ns = r.end_ns - r.begin_ns;
  for (std::size_t i = 0; i < gpus_.size(); ++i) r.gpus.push_back(finish(w, i));
  windows_.erase(it);
  return r;
}

GpuWindow Sampler::finish(const Window& w, std::size_t i) const {
  const EdgeValue& a = w.begin->gpus[i];
  const EdgeValue& b = w.end->gpus[i];
  GpuWindow out;
  out.gpu = infos_[i].index;
  out.time_ns = w.end->t - w.begin->t;
  out.lost = a.lost || b.lost;
  const Ns period_ns = opt_.counter_period.count();
  bool counter_both = a.counter_mj && b.counter_mj;
  bool power_both = a.integral_j && b.integral_j;
  if (counter_both && a.counter_located && b.counter_located && out.time_ns >= period_ns && !out.lost) {
    out.energy_j = (*b.counter_mj - *a.counter_mj) * 1e-3;
    out.method = "counter";
  } else if (power_both) {
    out.energy_j = *b.integral_j - *a.integral_j;
    out.method = "power";
    out.approximate = true;
  } else if (counter_both) {
    out.energy_j = (*b.counter_mj - *a.counter_mj) * 1e-3;
    out.method = "counter-reads";
    out.approximate = true;
  } else {
    out.method = "none";
    out.approximate = true;
  }
  out.energy_j = std::max(0.0, out.energy_j);
  out.avg_power_w = out.time_ns > 0 ? out.energy_j / (static_cast<double>(out.time_ns) * 1e-9) : 0;  // J over s
  // Only edge values and peaks here: the power history belongs to the sampler thread.
  out.peak_power_w = w.peak_w[i].value_or(std::max(a.power_w.value_or(0.0), b.power_w.value_or(0.0)));
  return out;
}

std::vector<GpuSample> Sampler::latest() const {
  std::lock_guard<std::mutex> lk(mu_);
  std::vector<GpuSample> out;
  for (std::size_t i = 0; i < latest_.size(); ++i) {
    if (latest_[i].t != 0) out.push_back(latest_[i]);
  }
  return out;
}

}  // namespace gearshift::monitor
