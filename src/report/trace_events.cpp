#include "report/trace_events.hpp"

#include <zlib.h>

#include <array>
#include <cmath>
#include <map>
#include <set>
#include <stdexcept>

#include <fmt/format.h>

#include "trace/error.hpp"

namespace gearshift::report {
namespace {

using json = nlohmann::json;

// ns -> "µs.fff" exactly (no rounding through double).
std::string micros(std::int64_t ns) {
  const char* sign = ns < 0 ? "-" : "";
  const std::uint64_t a = ns < 0 ? 0 - static_cast<std::uint64_t>(ns) : static_cast<std::uint64_t>(ns);
  return fmt::format("{}{}.{:03}", sign, a / 1000, a % 1000);
}

const char* category(trace::OpKind k) {
  switch (k) {
    case trace::OpKind::kernel: return "kernel";
    case trace::OpKind::memcpy: return "gpu_memcpy";
    case trace::OpKind::memset: return "gpu_memset";
  }
  return "kernel";
}

// gzip or plain output through zlib ("T": transparent, uncompressed).
class Out {
 public:
  explicit Out(const std::string& path) : path_(path) {
    const bool gz = path.size() > 3 && path.compare(path.size() - 3, 3, ".gz") == 0;
    f_ = gzopen(path.c_str(), gz ? "wb6" : "wbT");
    if (f_ == nullptr) throw trace::TraceError(path, "cannot open for writing");
  }
  ~Out() {
    if (f_ != nullptr) gzclose(f_);
  }
  Out(const Out&) = delete;
  Out& operator=(const Out&) = delete;
  void put(const std::string& s) {
    if (!s.empty() && gzwrite(f_, s.data(), static_cast<unsigned>(s.size())) != static_cast<int>(s.size()))
      throw trace::TraceError(path_, "write failed (disk full?)");
  }
  void close() {
    const int rc = gzclose(f_);
    f_ = nullptr;
    if (rc != Z_OK) throw trace::TraceError(path_, "close failed (disk full?)");
  }

 private:
  std::string path_;
  gzFile f_ = nullptr;
};

}  // namespace

std::vector<CounterTrack> sample_tracks(const trace::Trace& t) {
  // device -> its three tracks, in device order.
  std::map<std::int32_t, std::array<CounterTrack, 3>> by_device;
  for (const auto& s : t.samples) {
    auto [it, fresh] = by_device.try_emplace(s.device);
    auto& tr = it->second;
    if (fresh) {
      const char* names[] = {"SM clock (MHz)", "memory clock (MHz)", "power (W)"};
      for (int i = 0; i < 3; ++i) tr[i] = {names[i], s.device, fmt::format("GPU {}", s.device), {}};
    }
    if (s.sm_clock_mhz > 0) tr[0].points.push_back({s.time_ns, static_cast<double>(s.sm_clock_mhz)});
    if (s.mem_clock_mhz > 0) tr[1].points.push_back({s.time_ns, static_cast<double>(s.mem_clock_mhz)});
    if (s.power_mw >= 0) tr[2].points.push_back({s.time_ns, s.power_mw / 1000.0});
  }
  std::vector<CounterTrack> out;
  for (auto& [device, tracks] : by_device)
    for (auto& tr : tracks)
      if (!tr.points.empty()) out.push_back(std::move(tr));
  return out;
}

void write_trace_events(const TimelineContent& c, const std::string& path) {
  for (const auto& tr : c.counters)
    for (const auto& p : tr.points)
      if (!std::isfinite(p.value))
        throw std::invalid_argument(fmt::format("counter track '{}': value at {} ns is not a finite number", tr.name,
                                                p.time_ns));
  Out out(path);
  out.put("{\"displayTimeUnit\":\"ns\",\"otherData\":" + c.other_data.dump() + ",\"traceEvents\":[\n");
  bool first = true;
  auto event = [&](const std::string& e) {
    out.put(first ? e : ",\n" + e);
    first = false;
  };
  // Row names first: a viewer names a process by its first process_name event.
  std::set<std::int64_t> named;
  for (const auto& tr : c.counters)
    if (!tr.process.empty() && named.insert(tr.pid).second)
      event(fmt::format(R"({{"ph":"M","name":"process_name","pid":{},"tid":0,"args":{{"name":{}}}}})", tr.pid,
                        json(tr.process).dump()));
  if (const trace::Trace* t = c.trace) {
    const std::int64_t off = c.trace_offset_ns;
    for (const auto& r : t->ops) {
      json args = {{"device", r.device}, {"stream", r.stream}, {"correlation", r.correlation}};
      if (r.kind == trace::OpKind::kernel) {
        args["grid"] = r.grid;
        args["block"] = r.block;
        args["registers per thread"] = r.registers_per_thread;
        args["shared memory"] = r.shared_memory_bytes;
      } else {
        args["bytes"] = r.bytes;
      }
      if (r.sm_clock_mhz > 0) args["sm clock MHz"] = r.sm_clock_mhz;
      if (r.mem_clock_mhz > 0) args["memory clock MHz"] = r.mem_clock_mhz;
      event(fmt::format(R"({{"ph":"X","cat":"{}","name":{},"pid":{},"tid":{},"ts":{},"dur":{},"args":{}}})",
                        category(r.kind), json(t->name_of(r)).dump(), r.device, r.stream, micros(r.start_ns + off),
                        micros(r.duration_ns), args.dump()));
    }
    // Host-side ranges on their own process row so that they don't mix with device streams.
    for (const auto& m : t->markers)
      event(fmt::format(R"({{"ph":"X","cat":"{}","name":{},"pid":"{}","tid":0,"ts":{},"dur":{}}})",
                        m.on_gpu ? "gpu_user_annotation" : "user_annotation", json(m.name).dump(),
                        m.on_gpu ? "GPU ranges" : "CPU ranges", micros(m.start_ns + off), micros(m.duration_ns)));
    // Only when the trace holds every synchronize: the importer takes CUDA runtime events as all of them.
    if (t->syncs_recorded)
      for (const auto& y : t->syncs) {
        const char* name = y.scope == trace::SyncRecord::Scope::device   ? "cudaDeviceSynchronize"
                           : y.scope == trace::SyncRecord::Scope::stream ? "cudaStreamSynchronize"
                                                                         : "cudaEventSynchronize";
        json args = {{"correlation", y.correlation}};
        if (y.stream >= 0) args["stream"] = y.stream;
        event(fmt::format(
            R"({{"ph":"X","cat":"cuda_runtime","name":"{}","pid":"CPU ranges","tid":1,"ts":{},"dur":{},"args":{}}})",
            name, micros(y.enter_ns + off), micros(y.duration_ns), args.dump()));
      }
  }
  for (const auto& tr : c.counters) {
    const std::string name = json(tr.name).dump();
    for (const auto& p : tr.points)
      event(fmt::format(R"({{"ph":"C","name":{},"pid":{},"tid":0,"ts":{},"args":{{"value":{}}}}})", name, tr.pid,
                        micros(p.time_ns), json(p.value).dump()));
  }
  out.put("\n]}\n");
  out.close();
}

}  // namespace gearshift::report
