#include "cupti/chrome_export.hpp"

#include <zlib.h>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "trace/error.hpp"

namespace gearshift::cupti {
namespace {

// ns -> "µs.fff" exactly.
std::string micros(std::int64_t ns) {
  const char* sign = ns < 0 ? "-" : "";
  std::uint64_t a = ns < 0 ? 0 - static_cast<std::uint64_t>(ns) : static_cast<std::uint64_t>(ns);
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

class Out {
 public:
  explicit Out(const std::string& path) : path_(path) {
    bool gz = path.size() > 3 && path.compare(path.size() - 3, 3, ".gz") == 0;
    f_ = gzopen(path.c_str(), gz ? "wb6" : "wbT");  // T: plain, uncompressed output
    if (f_ == nullptr) throw trace::TraceError(path, "cannot open for writing");
  }
  ~Out() {
    if (f_ != nullptr) gzclose(f_);
  }
  void put(const std::string& s) {
    if (!s.empty() && gzwrite(f_, s.data(), static_cast<unsigned>(s.size())) != static_cast<int>(s.size()))
      throw trace::TraceError(path_, "write failed (disk full?)");
  }
  void close() {
    int rc = gzclose(f_);
    f_ = nullptr;
    if (rc != Z_OK) throw trace::TraceError(path_, "close failed (disk full?)");
  }

 private:
  std::string path_;
  gzFile f_ = nullptr;
};

}  // namespace

void write_chrome_trace(const trace::Trace& t, const std::string& path) {
  using json = nlohmann::json;
  Out out(path);
  json other = {{"producer", "gearshift"}, {"source", t.source}, {"format", t.format}, {"gpu", t.gpu_name},
                {"complete", t.complete}};
  json meta = json::parse(t.meta_json, nullptr, false);
  if (!meta.is_discarded()) other["meta"] = meta;
  out.put("{\"displayTimeUnit\":\"ns\",\"otherData\":" + other.dump() + ",\"traceEvents\":[\n");
  bool first = true;
  auto event = [&](const std::string& e) {
    out.put(first ? e : ",\n" + e);
    first = false;
  };
  for (const auto& r : t.ops) {
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
                      category(r.kind), json(t.name_of(r)).dump(), r.device, r.stream, micros(r.start_ns),
                      micros(r.duration_ns), args.dump()));
  }
  // Host-side ranges on their own process row so that they don't mix with device streams.
  for (const auto& m : t.markers)
    event(fmt::format(R"({{"ph":"X","cat":"{}","name":{},"pid":"{}","tid":0,"ts":{},"dur":{}}})",
                      m.on_gpu ? "gpu_user_annotation" : "user_annotation", json(m.name).dump(),
                      m.on_gpu ? "GPU ranges" : "CPU ranges", micros(m.start_ns), micros(m.duration_ns)));
  for (const auto& s : t.samples) {
    json args = {{"SM MHz", s.sm_clock_mhz}, {"memory MHz", s.mem_clock_mhz}};
    if (s.power_mw >= 0) args["power W"] = s.power_mw / 1000.0;
    event(fmt::format(R"({{"ph":"C","name":"GPU {} clocks and power","pid":{},"ts":{},"args":{}}})", s.device,
                      s.device, micros(s.time_ns), args.dump()));
  }
  // The job's synchronizes as torch.profiler writes them (CUDA runtime events), which the importer reads back;
  // only when the trace holds them all (an importer takes CUDA runtime events as "every synchronize is here").
  if (t.syncs_recorded)
    for (const auto& y : t.syncs) {
      const char* name = y.scope == trace::SyncRecord::Scope::device   ? "cudaDeviceSynchronize"
                         : y.scope == trace::SyncRecord::Scope::stream ? "cudaStreamSynchronize"
                                                                       : "cudaEventSynchronize";
      json args = {{"correlation", y.correlation}};
      if (y.stream >= 0) args["stream"] = y.stream;
      event(fmt::format(R"({{"ph":"X","cat":"cuda_runtime","name":"{}","pid":"CPU ranges","tid":1,"ts":{},"dur":{},"args":{}}})",
                        name, micros(y.enter_ns), micros(y.duration_ns), args.dump()));
    }
  out.put("\n]}\n");
  out.close();
}

}  // namespace gearshift::cupti
