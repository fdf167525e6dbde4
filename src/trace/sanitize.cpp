#include "trace/sanitize.hpp"

#include <algorithm>
#include <cstdint>
#include <map>
#include <string>
#include <vector>
#include <tuple>

#include <fmt/format.h>

#include "trace/error.hpp"

namespace gearshift::trace {
namespace {

bool zero_time(std::int64_t start_ns, std::int64_t duration_ns) { return start_ns == 0 && duration_ns == 0; }

bool same_op(const OpRecord& a, const OpRecord& b) {
  return a.kind == b.kind && a.name_id == b.name_id && a.start_ns == b.start_ns && a.duration_ns == b.duration_ns &&
         a.device == b.device && a.stream == b.stream && a.correlation == b.correlation;
}

std::string short_name(const std::string& n) { return n.size() > 60 ? n.substr(0, 57) + "..." : n; }

void drop_zero_time(Trace& t) {
  const std::size_t ops = t.ops.size(), markers = t.markers.size();
  std::erase_if(t.ops, [](const OpRecord& r) { return zero_time(r.start_ns, r.duration_ns); });
  std::erase_if(t.markers, [](const Marker& m) { return zero_time(m.start_ns, m.duration_ns); });
  const std::size_t dropped_ops = ops - t.ops.size(), dropped_markers = markers - t.markers.size();
  t.health.zero_time_ops += dropped_ops;
  t.health.zero_time_markers += dropped_markers;
  if (dropped_ops + dropped_markers > 0)
    t.health.warnings.push_back(fmt::format(
        "dropped {} GPU op(s) and {} step marker(s) with ts 0 and dur 0 (a known Kineto export bug): they are part "
        "of no step",
        dropped_ops, dropped_markers));
}

void drop_duplicates(Trace& t) {
  // Ops are sorted by start: duplicates share a start, so only ops of one start are compared. Compacted in
  // place: a copy of a 1 GiB trace's ops would double the importer's peak memory.
  std::size_t kept = 0, group = 0, dropped = 0;  // group: index of the first kept op with the current start
  for (std::size_t i = 0; i < t.ops.size(); ++i) {
    const OpRecord& r = t.ops[i];
    if (kept == 0 || t.ops[kept - 1].start_ns != r.start_ns) group = kept;
    bool dup = false;
    for (std::size_t j = group; j < kept && !dup; ++j) dup = same_op(t.ops[j], r);
    if (dup) {
      ++dropped;
    } else {
      if (kept != i) t.ops[kept] = r;
      ++kept;
    }
  }
  t.ops.resize(kept);
  const std::size_t markers = t.markers.size();
  auto key = [](const Marker& m) { return std::tie(m.start_ns, m.duration_ns, m.on_gpu, m.name); };
  std::stable_sort(t.markers.begin(), t.markers.end(), [&](const Marker& a, const Marker& b) { return key(a) < key(b); });
  t.markers.erase(std::unique(t.markers.begin(), t.markers.end(), [&](const Marker& a, const Marker& b) { return key(a) == key(b); }),
                  t.markers.end());
  const std::size_t dropped_markers = markers - t.markers.size();
  t.health.duplicate_ops += dropped;
  t.health.duplicate_markers += dropped_markers;
  if (dropped + dropped_markers > 0)
    t.health.warnings.push_back(fmt::format("dropped {} op(s) and {} step marker(s) that were exact duplicates of another",
                                            dropped, dropped_markers));
}

void flag_overruns(Trace& t) {
  // One pass in start order, remembering each stream's previous op: memory per stream, not per op.
  struct Stream {
    std::size_t last = SIZE_MAX;  // index of the stream's previous op
    std::size_t ops = 0;
    std::vector<std::pair<std::size_t, std::int64_t>> over;  // (op index, overrun ns)
  };
  std::map<std::pair<std::int32_t, std::int32_t>, Stream> streams;  // (device, stream)
  for (std::size_t i = 0; i < t.ops.size(); ++i) {
    Stream& s = streams[{t.ops[i].device, t.ops[i].stream}];
    ++s.ops;
    if (s.last != SIZE_MAX && !t.ops[s.last].suspect) {  // suspect: flagged by an earlier call
      const std::int64_t o = t.ops[s.last].end_ns() - t.ops[i].start_ns;
      if (o > kOverrunToleranceNs) s.over.push_back({s.last, o});
    }
    s.last = i;
  }
  std::size_t flagged = 0, skipped_streams = 0;
  const OpRecord* worst = nullptr;
  std::int64_t worst_over = 0;
  for (auto& [key, s] : streams) {
    if (s.over.empty()) continue;
    if (s.over.size() > std::max<std::size_t>(2, static_cast<std::size_t>(kMaxOverrunShare * static_cast<double>(s.ops)))) {
      ++skipped_streams;
      continue;
    }
    for (auto [i, o] : s.over) {
      t.ops[i].suspect = true;
      ++flagged;
      if (o > worst_over) worst_over = o, worst = &t.ops[i];
    }
  }
  t.health.overrunning_ops += flagged;
  if (flagged > 0)
    t.health.warnings.push_back(fmt::format(
        "{} op(s) end after the next op of their stream starts, which cannot happen (longest: '{}', {:.3f} ms, "
        "{:.3f} ms past its successor's start): their steps are left out of the template",
        flagged, short_name(t.names[worst->name_id]), static_cast<double>(worst->duration_ns) / 1e6,
        static_cast<double>(worst_over) / 1e6));
  if (skipped_streams > 0)
    t.health.warnings.push_back(fmt::format(
        "{} stream(s) hold many overlapping ops: their stream ids are not real CUDA streams, so the overrun rule "
        "was not applied to them",
        skipped_streams));
}

void repair_markers(Trace& t) {
  std::stable_sort(t.markers.begin(), t.markers.end(),
                   [](const Marker& a, const Marker& b) { return a.start_ns < b.start_ns; });
  const std::size_t before = t.markers.size();
  std::erase_if(t.markers, [](const Marker& m) { return m.duration_ns == 0; });
  const std::size_t collapsed = before - t.markers.size();
  std::size_t cut = 0;
  for (bool gpu : {false, true}) {
    Marker* prev = nullptr;
    for (Marker& m : t.markers) {
      if (m.on_gpu != gpu) continue;
      // A small overlap is a late end (cut it); ranges overlapping by half or more run in parallel (two
      // processes' markers merged into one file) and are left as they are.
      const std::int64_t overlap = prev == nullptr ? 0 : prev->start_ns + prev->duration_ns - m.start_ns;
      if (overlap > 0 && prev->start_ns < m.start_ns && 2 * overlap < std::min(prev->duration_ns, m.duration_ns)) {
        prev->duration_ns = m.start_ns - prev->start_ns;
        ++cut;
      }
      prev = &m;
    }
  }
  t.health.collapsed_markers += collapsed;
  t.health.repaired_markers += cut;
  if (collapsed > 0)
    t.health.warnings.push_back(fmt::format("dropped {} step marker(s) of zero length (collapsed ranges)", collapsed));
  if (cut > 0)
    t.health.warnings.push_back(
        fmt::format("{} step marker(s) overlapped the next one: each was cut at the next marker's start", cut));
}

}  // namespace

void sanitize_trace(Trace& trace) {
  drop_zero_time(trace);
  drop_duplicates(trace);
  flag_overruns(trace);
  repair_markers(trace);
}

void check_time_unit(const Trace& t, const std::string& path) {
  std::vector<std::int64_t> d;
  for (const auto& op : t.ops)
    if (op.kind == OpKind::kernel && op.duration_ns > 0) d.push_back(op.duration_ns);
  if (d.size() < kTimeUnitMinKernels) return;
  std::nth_element(d.begin(), d.begin() + static_cast<std::ptrdiff_t>(d.size() / 2), d.end());
  const std::int64_t median = d[d.size() / 2];
  if (median < kMinMedianKernelNs)
    throw TraceError(path, fmt::format("the median kernel lasts {} ns, shorter than any GPU kernel runs (the traces "
                                       "gearshift has seen: 2 to 194 µs): are the times in another unit than the "
                                       "Chrome trace's microseconds (ms read as µs)?",
                                       median));
}

}  // namespace gearshift::trace
