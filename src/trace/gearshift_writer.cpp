#include "trace/gearshift_writer.hpp"

#include <unordered_map>

#include <fmt/format.h>
#include <nlohmann/json.hpp>
#include <zlib.h>

#include "trace/error.hpp"

namespace gearshift::trace {
namespace {

using json = nlohmann::json;

// JSON text of `j`; ill-formed UTF-8 in a string (a kernel name from a broken producer) is written as U+FFFD
// rather than thrown as json::type_error out of a tracer running inside the user's process.
std::string dump(const json& j) { return j.dump(-1, ' ', false, json::error_handler_t::replace); }

char kind_code(OpKind k) {
  switch (k) {
    case OpKind::kernel: return 'k';
    case OpKind::memcpy: return 'c';
    case OpKind::memset: return 's';
  }
  return 'k';
}

}  // namespace

struct GearshiftTraceWriter::Impl {
  gzFile file = nullptr;
  std::unordered_map<std::string, std::uint32_t> ids;
  std::unordered_map<std::int64_t, std::uint32_t> graph_launches;  // correlation -> graph id, "g" written
};

GearshiftTraceWriter::GearshiftTraceWriter(const std::string& path, const std::string& source,
                                           const std::string& gpu_name, const std::string& meta_json)
    : impl_(std::make_unique<Impl>()), path_(path) {
  impl_->file = gzopen(path.c_str(), "wb6");
  if (impl_->file == nullptr) {
    error_ = path + ": cannot open for writing";
    return;
  }
  json meta = json::parse(meta_json, nullptr, false);
  if (meta.is_discarded() || !meta.is_object()) meta = json::object();
  json header = {{"format", "gearshift-trace"}, {"version", kGearshiftTraceVersion}, {"source", source},
                 {"gpu", gpu_name}, {"meta", meta}};
  put_line(dump(header));
}

GearshiftTraceWriter::~GearshiftTraceWriter() {
  if (!closed_ && impl_->file != nullptr) close(false, 0, "writer destroyed before close");
}

void GearshiftTraceWriter::put_line(const std::string& line) {
  if (!ok() || impl_->file == nullptr) return;
  std::string l = line + "\n";
  int n = gzwrite(impl_->file, l.data(), static_cast<unsigned>(l.size()));
  if (n != static_cast<int>(l.size())) {
    int errnum = 0;
    const char* msg = gzerror(impl_->file, &errnum);
    error_ = fmt::format("{}: write failed ({})", path_, msg != nullptr ? msg : "disk full?");
  }
}

void GearshiftTraceWriter::write(const OpRecord& op, const std::string& name) {
  auto it = impl_->ids.find(name);
  std::uint32_t id;
  if (it == impl_->ids.end()) {
    id = static_cast<std::uint32_t>(impl_->ids.size());
    impl_->ids.emplace(name, id);
    put_line(dump(json::array({"n", id, name})));
  } else {
    id = it->second;
  }
  if (op.graph_id != 0 && op.correlation >= 0 && impl_->graph_launches.try_emplace(op.correlation, op.graph_id).second)
    put_line(fmt::format("[\"g\",{},{}]", op.correlation, op.graph_id));
  put_line(fmt::format("[\"{}\",{},{},{},{},{},{},[{},{},{}],[{},{},{}],{},{},{},{},{},{}]", kind_code(op.kind), id,
                       op.start_ns, op.duration_ns, op.device, op.stream, op.correlation, op.grid[0], op.grid[1],
                       op.grid[2], op.block[0], op.block[1], op.block[2], op.registers_per_thread,
                       op.shared_memory_bytes, op.bytes, op.sm_clock_mhz, op.mem_clock_mhz, op.launch_ns));
  ++records_;
}

void GearshiftTraceWriter::write(const Marker& m) {
  put_line(dump(json::array({"m", m.name, m.start_ns, m.duration_ns, m.on_gpu ? 1 : 0})));
  ++records_;
}

void GearshiftTraceWriter::write(const DeviceSample& p) {
  put_line(fmt::format("[\"p\",{},{},{},{},{}]", p.device, p.time_ns, p.sm_clock_mhz, p.mem_clock_mhz,
                       p.power_mw));
  ++records_;
}

void GearshiftTraceWriter::write(const SyncRecord& y) {
  put_line(fmt::format("[\"y\",\"{}\",{},{},{},{},{}]", to_string(y.scope), y.device, y.stream, y.correlation,
                       y.enter_ns, y.duration_ns));
  ++records_;
}

void GearshiftTraceWriter::close(bool complete, std::uint64_t dropped_records, const std::string& note) {
  if (closed_) return;
  closed_ = true;
  if (impl_->file == nullptr) return;
  json trailer = {{"complete", complete && ok()}, {"records", records_}, {"dropped_records", dropped_records},
                  {"synchronizes", syncs_recorded_}};
  if (!note.empty()) trailer["note"] = note;
  put_line(dump(json::array({"end", trailer})));
  if (gzclose(impl_->file) != Z_OK && ok()) error_ = path_ + ": close failed (disk full?)";
  impl_->file = nullptr;
}

void write_gearshift_trace(const Trace& trace, const std::string& path) {
  GearshiftTraceWriter w(path, trace.source, trace.gpu_name, trace.meta_json);
  for (const auto& op : trace.ops) w.write(op, trace.name_of(op));
  for (const auto& m : trace.markers) w.write(m);
  for (const auto& p : trace.samples) w.write(p);
  for (const auto& y : trace.syncs) w.write(y);
  w.set_syncs_recorded(trace.syncs_recorded);
  w.close(trace.complete);
  if (!w.ok()) throw TraceError(path, w.error());
}

}  // namespace gearshift::trace
