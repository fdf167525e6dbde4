#include "runtime/feed_collector.hpp"

#include <algorithm>

#include "trace/graph_units.hpp"

namespace gearshift::runtime {

void FeedCollector::add(const feed::FeedEvent& e) {
  if (e.kind == feed::FeedEvent::Kind::launch) {
    ++launches_;
    if (full()) return;
    auto it = ids_.find(e.name);  // a string is built only for a name seen the first time
    if (it == ids_.end()) {
      it = ids_.emplace(std::string(e.name), static_cast<std::uint32_t>(names_.size())).first;
      names_.emplace_back(e.name);
    }
    const auto graph = trace::graph_id_of_launch_name(e.name);
    pending_[e.correlation] = {it->second, e.cpu_ns, graph.value_or(0), graph.has_value()};
    if (graph) {
      graph_launches_.push_back(e.correlation);
      if (graph_launches_.size() > kMaxPendingGraphLaunches) {
        pending_.erase(graph_launches_.front());
        graph_launches_.pop_front();
      }
    }
    return;
  }
  if (e.kind == feed::FeedEvent::Kind::sync) {
    if (syncs_.size() < max_kernels_) syncs_.push_back(e.gpu_end_ns);
    return;
  }
  if (e.kind == feed::FeedEvent::Kind::marker) return;  // no kernel of its own
  auto it = pending_.find(e.correlation);
  if (it == pending_.end()) {
    ++unmatched_;
    return;
  }
  if (!full() && e.gpu_end_ns >= e.gpu_start_ns) {
    trace::OpRecord r;
    r.kind = trace::OpKind::kernel;
    r.name_id = it->second.name_id;
    r.start_ns = e.gpu_start_ns;
    r.duration_ns = e.gpu_end_ns - e.gpu_start_ns;
    r.device = e.device;
    r.stream = e.stream;
    r.correlation = e.correlation;
    r.launch_ns = it->second.cpu_ns;
    r.graph_id = it->second.graph_id;
    ops_.push_back(r);
  }
  if (!it->second.graph) pending_.erase(it);
}

trace::Trace FeedCollector::snapshot() const {
  trace::Trace t;
  t.source = "launch feed";
  t.format = "gearshift launch feed";
  t.names = names_;
  t.ops = ops_;
  return t;
}

void FeedCollector::sort_by_start(trace::Trace& t) {
  // Completions arrive in activity-buffer order, not GPU order; the trace's contract is sorted by start.
  std::stable_sort(t.ops.begin(), t.ops.end(),
                   [](const trace::OpRecord& a, const trace::OpRecord& b) { return a.start_ns < b.start_ns; });
}

trace::Trace FeedCollector::to_trace() const {
  trace::Trace t = snapshot();
  sort_by_start(t);
  return t;
}

}  // namespace gearshift::runtime
