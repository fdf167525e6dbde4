// Candidate steps from the step markers (ProfilerStep#N, NVTX gearshift.step): CPU ranges that cut the main
// stream where the trace maps each kernel to the CPU time of its launch.
#include "trace/step/detector.hpp"

#include <algorithm>

namespace gearshift::trace::step_detail {

Detector::Cut Detector::cut_by_markers() const {
  Cut c;
  c.method = "step markers";
  c.bounds = marker_bounds(c.p);
  if (c.bounds.size() < 2) throw NoIterationError("the trace's step markers cover fewer than 2 steps");
  return c;
}

// Kernels carry launch times when the trace recorded launch calls (copies and memsets go through other APIs).
bool Detector::have_launch_times() const {
  std::size_t with = 0, kernels = 0;
  for (std::size_t i : main_) {
    const auto& r = trace_.ops[i];
    if (r.kind != OpKind::kernel) continue;
    ++kernels;
    with += r.launch_ns >= 0;
  }
  return kernels > 0 && with * 10 >= kernels * 9;
}

// Step markers (ProfilerStep#N, NVTX gearshift.step) are CPU-side ranges: they define steps only where the
// trace maps each kernel to the CPU time of its launch (correlation with runtime API events, or gearshift's
// own tracer). By GPU time alone they cannot: a GPU that lags its CPU (waiting in a collective) runs the last
// kernels of step k well after marker k+1 began. GPU-side copies of the markers in torch 2.x traces are
// instants placed mid-step, not at the step's first kernel. Without launch times the kernel stream decides.
std::vector<const Marker*> Detector::select_markers() const {
  std::vector<const Marker*> cpu;
  if (!opt_.use_markers || !have_launch_times()) return {};
  for (const auto& m : trace_.markers)
    if (!m.on_gpu) cpu.push_back(&m);
  return cpu.size() >= 2 ? cpu : std::vector<const Marker*>{};
}

// First main-stream op that belongs to a step starting at `t` on the marker's timeline.
std::size_t Detector::first_main_in_step(std::int64_t t, bool by_launch) const {
  if (!by_launch) return first_main_at_or_after(t);
  for (std::size_t i = 0; i < main_.size(); ++i) {
    const auto& r = trace_.ops[main_[i]];
    if (r.launch_ns < 0 || r.launch_ns < t) continue;
    // Ops without launch times right before it (copies, memsets) that started after the marker belong here.
    while (i > 0) {
      const auto& prev = trace_.ops[main_[i - 1]];
      if (prev.kind == OpKind::kernel || prev.launch_ns >= 0 || prev.start_ns < t) break;
      --i;
    }
    return i;
  }
  return main_.size();
}

std::vector<std::size_t> Detector::marker_bounds(std::size_t& p) const {
  std::vector<std::size_t> b;
  auto ms = select_markers();
  const bool by_launch = true;
  for (const Marker* m : ms) {
    std::size_t i = first_main_in_step(m->start_ns, by_launch);
    if (i < seq_.size() && (b.empty() || i > b.back())) b.push_back(i);
  }
  std::size_t end = first_main_in_step(ms.back()->start_ns + std::max<std::int64_t>(ms.back()->duration_ns, 1), by_launch);
  if (!b.empty() && end > b.back()) b.push_back(end);
  std::vector<std::size_t> lens;
  for (std::size_t k = 0; k + 1 < b.size(); ++k) lens.push_back(b[k + 1] - b[k]);
  std::sort(lens.begin(), lens.end());
  p = lens.empty() ? 0 : lens[lens.size() / 2];
  seq_end_ = end;  // ops after the last marker's end belong to no recorded step
  return b;
}

}  // namespace gearshift::trace::step_detail
