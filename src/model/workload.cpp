#include "model/workload.hpp"

#include "trace/idle_rescale.hpp"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdint>
#include <unordered_map>
#include <utility>

namespace gearshift::model {

const char* to_string(Pass p) {
  switch (p) {
    case Pass::forward: return "forward";
    case Pass::backward: return "backward";
    case Pass::optimizer: return "optimizer";
  }
  return "forward";
}

namespace {
bool is_backward_name(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  for (const char* key : {"backward", "bwd", "_grad", "grad_", "dgrad", "wgrad"})
    if (s.find(key) != std::string::npos) return true;
  return false;
}
}  // namespace

Workload build_workload(const trace::Trace& trace, const trace::IterationAnalysis& a, const DvfsModel& model) {
  Workload w;
  w.period_ns = a.tmpl.period_ns;
  w.kernels = a.tmpl.kernels;
  w.syncs = a.tmpl.syncs;
  w.syncs_known = a.tmpl.syncs_known;
  w.cpu_note = a.tmpl.cpu_note;
  double last_end = 0;
  std::size_t first_backward = a.tmpl.ops.size(), first_optimizer = a.tmpl.ops.size();
  // Ops repeat names (every layer's kernels): each (name, kind) is classified once.
  std::unordered_map<std::uint64_t, KernelClass> class_of;
  for (std::size_t i = 0; i < a.tmpl.ops.size(); ++i) {
    const auto& t = a.tmpl.ops[i];
    WorkloadOp op;
    op.name = trace.names[t.name_id];
    op.kind = t.kind;
    const std::uint64_t key = std::uint64_t{t.name_id} << 8 | static_cast<std::uint64_t>(t.kind);
    auto known = class_of.find(key);
    if (known == class_of.end()) known = class_of.emplace(key, classify(t.kind, op.name)).first;
    op.cls = known->second;
    op.coeffs = class_prior(op.cls);
    op.stream = t.stream;
    op.ref_time_ns = t.duration_ns;
    op.start_offset_ns = t.start_offset_ns;
    op.gap_before_ns = t.gap_before_ns;
    op.graph_id = t.graph_id;
    op.graph_launch = t.graph_launch;
    op.launch_offset_ns = t.launch_offset_ns;
    op.launch_known = t.launch_known;
    op.ref_launch_ns = t.ref_launch_ns;
    if (t.sm_clock_mhz > 0) {
      op.ref = {t.sm_clock_mhz, t.mem_clock_mhz > 0 ? t.mem_clock_mhz : model.spec().default_mem_clock_mhz};
      op.ref_sampled = true;
    }
    if (first_backward == a.tmpl.ops.size() && t.kind == trace::OpKind::kernel && is_backward_name(op.name))
      first_backward = i;
    if (first_optimizer == a.tmpl.ops.size() && op.cls == KernelClass::optimizer) first_optimizer = i;
    last_end = std::max(last_end, t.start_offset_ns + t.duration_ns);
    w.ops.push_back(std::move(op));
  }
  for (std::size_t i = 0; i < w.ops.size(); ++i)
    w.ops[i].pass = i >= first_optimizer ? Pass::optimizer : i >= first_backward ? Pass::backward : Pass::forward;
  w.tail_ns = std::max(0.0, w.period_ns - last_end);
  set_window_idle_shares(w, model.spec().power_limit_window_ns, model.params().gap_decay_ns);
  refresh_reference_clocks(w, model);
  return w;
}

void refresh_reference_clocks(Workload& w, const DvfsModel& model) {
  for (auto& op : w.ops)
    if (!op.ref_sampled) op.ref = model.default_reference(op.coeffs, op.window_idle_share);
}

Prediction predict_op(const DvfsModel& model, const WorkloadOp& op, ClockPair requested) {
  return model.predict(op.ref_time_ns, op.ref, requested, op.coeffs, op.window_idle_share);
}

void set_window_idle_shares(Workload& w, double window_ns, double gap_decay_ns) {
  for (auto& op : w.ops) op.window_idle_share = 0;
  const double period = w.period_ns;
  if (!(window_ns > 0) || !(period > 0) || w.ops.empty()) return;
  // The busy spans of one period: the union of every op's [start, end) over all streams.
  std::vector<std::pair<double, double>> busy;
  for (const auto& op : w.ops)
    busy.emplace_back(std::clamp(op.start_offset_ns, 0.0, period),
                      std::clamp(op.start_offset_ns + op.ref_time_ns, 0.0, period));
  const std::vector<std::pair<double, double>> merged = trace::merged_intervals(std::move(busy));
  if (merged.empty()) return;
  // The idle part of each gap (the gap after span i runs to span i+1, the last one wraps to the first of the
  // next period): what remains after the fall to idle.
  auto fall = [&](double gap) { return gap_decay_ns > 0 ? -gap_decay_ns * std::expm1(-gap / gap_decay_ns) : 0.0; };
  std::vector<std::pair<double, double>> idle;  // [from, to) within [0, period); the wrapping gap split in two
  for (std::size_t i = 0; i < merged.size(); ++i) {
    const double to = i + 1 < merged.size() ? merged[i + 1].first : merged.front().first + period;
    const double from = merged[i].second + fall(to - merged[i].second);
    if (!(to > from)) continue;
    if (from >= period) {
      idle.emplace_back(from - period, to - period);
    } else if (to > period) {
      idle.emplace_back(from, period);
      idle.emplace_back(0.0, to - period);
    } else {
      idle.emplace_back(from, to);
    }
  }
  std::sort(idle.begin(), idle.end());
  std::vector<double> before(idle.size() + 1, 0.0);  // idle time in the intervals ahead of index i
  for (std::size_t i = 0; i < idle.size(); ++i) before[i + 1] = before[i] + (idle[i].second - idle[i].first);
  // Idle time in [0, x) of the repeating step, x ≥ 0.
  auto idle_before = [&](double x) {
    const double whole = std::floor(x / period), y = x - whole * period;
    auto it = std::upper_bound(idle.begin(), idle.end(), y,
                               [](double v, const std::pair<double, double>& g) { return v < g.first; });
    const auto n = static_cast<std::size_t>(it - idle.begin());
    double part = before[n];
    if (n > 0) part -= std::max(0.0, idle[n - 1].second - y);  // the interval holding y counts up to y only
    return whole * before.back() + part;
  };
  const double win = std::min(window_ns, period);
  for (auto& op : w.ops) {
    const double end = std::clamp(op.start_offset_ns + op.ref_time_ns, 0.0, period) + period;  // keep x ≥ win
    op.window_idle_share = std::clamp((idle_before(end) - idle_before(end - win)) / win, 0.0, 0.999);
  }
}

}  // namespace gearshift::model
