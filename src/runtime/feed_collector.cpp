#include "runtime/feed_collector.hpp"

#include <algorithm>

#include "trace/graph_units.hpp"

namespace gearshift::runtime {

std::uint32_t FeedCollector::intern(std::string_view name) {
  auto it = ids_.find(name);  // a string is built only for a name seen the first time
  if (it == ids_.end()) {
    it = ids_.emplace(std::string(name), static_cast<std::uint32_t>(names_.size())).first;
    names_.emplace_back(name);
  }
  return it->second;
}

void FeedCollector::add(const feed::FeedEvent& e) {
  if (e.kind == feed::FeedEvent::Kind::name) {
    named_[e.name_id] = intern(e.name);
    return;
  }
  if (e.kind == feed::FeedEvent::Kind::launch) {
    ++launches_;
    if (full()) return;
    const auto graph = trace::graph_id_of_launch_name(e.name);
    pending_[e.correlation] = {intern(e.name), e.cpu_ns, graph.value_or(0), graph.has_value()};
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
    if (syncs_.size() < max_ops_) {
      trace::SyncRecord y;
      y.correlation = e.correlation;
      y.enter_ns = e.gpu_start_ns;
      y.duration_ns = std::max<std::int64_t>(0, e.gpu_end_ns - e.gpu_start_ns);
      syncs_.push_back(y);
    }
    return;
  }
  if (e.kind == feed::FeedEvent::Kind::marker) return;  // no kernel of its own
  if (e.kind == feed::FeedEvent::Kind::copy) {
    if (full() || e.gpu_end_ns < e.gpu_start_ns) return;
    trace::OpRecord r;
    r.kind = e.memset ? trace::OpKind::memset : trace::OpKind::memcpy;
    r.name_id = intern(e.name);
    r.start_ns = e.gpu_start_ns;
    r.duration_ns = e.gpu_end_ns - e.gpu_start_ns;
    r.device = e.device;
    r.stream = e.stream;
    r.correlation = e.correlation;
    r.bytes = e.bytes;
    if (auto it = pending_.find(e.correlation); it != pending_.end() && it->second.graph) {
      r.graph_id = it->second.graph_id;  // a graph's copy node: launched with its graph, as the tracer records it
      r.launch_ns = it->second.cpu_ns;
    }
    ops_.push_back(r);
    ++copies_;
    return;
  }
  auto it = pending_.find(e.correlation);
  if (it == pending_.end()) {
    ++unmatched_;
    return;
  }
  if (!full() && e.gpu_end_ns >= e.gpu_start_ns) {
    trace::OpRecord r;
    r.kind = trace::OpKind::kernel;
    r.name_id = it->second.name_id;
    if (e.name_id >= 0) {  // a graph kernel named on its own C line
      const auto named = named_.find(e.name_id);
      if (named != named_.end()) r.name_id = named->second;
    }
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
  t.syncs = syncs_;
  t.syncs_recorded = !syncs_.empty();
  return t;
}

std::vector<std::int64_t> FeedCollector::sync_exits() const {
  std::vector<std::int64_t> out;
  out.reserve(syncs_.size());
  for (const auto& y : syncs_) out.push_back(y.exit_ns());
  return out;
}

void FeedCollector::sort_by_start(trace::Trace& t) {
  // Completions arrive in activity-buffer order, not GPU order; the trace's contract is sorted by start.
  std::stable_sort(t.ops.begin(), t.ops.end(),
                   [](const trace::OpRecord& a, const trace::OpRecord& b) { return a.start_ns < b.start_ns; });
  std::stable_sort(t.syncs.begin(), t.syncs.end(),
                   [](const trace::SyncRecord& a, const trace::SyncRecord& b) { return a.enter_ns < b.enter_ns; });
}

trace::Trace FeedCollector::to_trace() const {
  trace::Trace t = snapshot();
  sort_by_start(t);
  return t;
}

}  // namespace gearshift::runtime
