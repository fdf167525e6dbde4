#include "runtime/feed.hpp"

namespace gearshift::runtime {

void feed_event(const feed::FeedEvent& e, LiveRuntime& rt) {
  using Kind = feed::FeedEvent::Kind;
  switch (e.kind) {
    case Kind::launch: rt.on_launch(e.name, e.correlation, e.cpu_ns); break;
    case Kind::complete: rt.on_complete(e.correlation, e.gpu_start_ns, e.gpu_end_ns); break;
    case Kind::sync: rt.on_sync(e.correlation, e.gpu_start_ns, e.gpu_end_ns); break;
    case Kind::marker: rt.on_marker(e.correlation, e.gpu_start_ns, e.gpu_end_ns); break;
    case Kind::name: break;  // the runtime counts launch units; a graph kernel's own name is for planning
    case Kind::copy: break;  // no launch of its own: for planning (the template's copies and memsets)
  }
}

bool feed_line(std::string_view line, LiveRuntime& rt) {
  auto e = feed::parse_feed_line(line);
  if (!e) return false;
  feed_event(*e, rt);
  return true;
}

}  // namespace gearshift::runtime
