#include "model/workload.hpp"

#include <algorithm>
#include <cctype>

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
  for (std::size_t i = 0; i < a.tmpl.ops.size(); ++i) {
    const auto& t = a.tmpl.ops[i];
    WorkloadOp op;
    op.name = trace.names[t.name_id];
    op.kind = t.kind;
    op.cls = classify(t.kind, op.name);
    op.coeffs = class_prior(op.cls);
    op.stream = t.stream;
    op.ref_time_ns = t.duration_ns;
    op.start_offset_ns = t.start_offset_ns;
    op.gap_before_ns = t.gap_before_ns;
    op.graph_id = t.graph_id;
    op.graph_launch = t.graph_launch;
    op.launch_offset_ns = t.launch_offset_ns;
    op.launch_known = t.launch_known;
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
  refresh_reference_clocks(w, model);
  return w;
}

void refresh_reference_clocks(Workload& w, const DvfsModel& model) {
  for (auto& op : w.ops)
    if (!op.ref_sampled) op.ref = model.default_reference(op.coeffs);
}

}  // namespace gearshift::model
