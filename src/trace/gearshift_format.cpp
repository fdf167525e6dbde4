#include "trace/gearshift_format.hpp"

#include <algorithm>
#include <istream>
#include <unordered_map>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "trace/chrome_import.hpp"
#include "trace/error.hpp"
#include "trace/graph_units.hpp"
#include "trace/gz_stream.hpp"
#include "trace/measured_check.hpp"
#include "trace/sanitize.hpp"

namespace gearshift::trace {
namespace {

using json = nlohmann::json;

std::string clip(const std::string& s, std::size_t n) { return s.size() > n ? s.substr(0, n - 3) + "..." : s; }

}  // namespace

Trace read_gearshift_trace(const std::string& path) {
  std::unique_ptr<GzStreamBuf> buf = open_trace_file(path);
  Utf8RepairStreamBuf text(*buf);  // ill-formed UTF-8 becomes U+FFFD: nlohmann-json would reject the line
  std::istream in(&text);
  Trace out;
  out.source = path;
  out.complete = false;
  std::string line;
  std::size_t lineno = 0;
  std::vector<std::uint32_t> remap;  // file name id -> out.names index
  std::unordered_map<std::string, std::uint32_t> name_index;  // name -> out.names index
  std::unordered_map<std::int64_t, std::uint32_t> graph_of;  // "g" records: correlation -> graph id
  std::size_t trailer_line = 0;      // 0: no trailer (yet)
  std::uint64_t trailer_records = 0, dropped = 0;
  int version = 0;
  bool trailer_syncs = false;  // the trailer says every synchronize was recorded
  std::string note;
  auto bad = [&](const std::string& what) { throw TraceError(path, fmt::format("line {}: {}", lineno, what)); };
  while (std::getline(in, line)) {
    ++lineno;
    if (line.empty()) continue;
    if (trailer_line != 0) bad(fmt::format("data after the trailer (line {})", trailer_line));
    json j = json::parse(line, nullptr, false);
    if (j.is_discarded()) bad(in.eof() ? "truncated line" : "not a JSON line");
    if (lineno == 1) try {
      if (!j.is_object() || j.value("format", "") != "gearshift-trace") bad("not a gearshift trace header");
      version = j.value("version", 0);
      if (version < kOldestGearshiftTraceVersion || version > kGearshiftTraceVersion)
        bad(fmt::format("unsupported gearshift trace version {} (this build reads {} to {})", version,
                        kOldestGearshiftTraceVersion, kGearshiftTraceVersion));
      out.format = fmt::format("gearshift-trace v{}", version);
      out.gpu_name = j.value("gpu", "");
      if (j.contains("source")) out.source = j["source"].get<std::string>();
      if (j.contains("meta") && j["meta"].is_object()) {
        out.meta_json = j["meta"].dump();
        const auto& m = j["meta"];
        for (const char* k : {"s_per_iter", "s_per_step"})
          if (m.contains(k) && m[k].is_number()) out.measured.step_time_s = m[k].get<double>();
        for (const char* k : {"J_per_iter", "J_per_step"})
          if (m.contains(k) && m[k].is_number()) out.measured.energy_per_step_j = m[k].get<double>();
        if (m.contains("avg_W") && m["avg_W"].is_number()) out.measured.average_power_w = m["avg_W"].get<double>();
      }
      continue;
    } catch (const json::exception& e) {
      bad(fmt::format("bad header: {}", e.what()));
    }
    if (!j.is_array() || j.empty() || !j[0].is_string()) bad("expected a JSON array starting with a tag");
    const std::string tag = j[0].get<std::string>();
    try {
      if (tag == "n") {
        if (j.size() != 3) bad(fmt::format("name record needs 3 fields, has {}", j.size()));
        auto id = j.at(1).get<std::uint32_t>();
        if (id != remap.size()) bad("name ids must be defined in order");
        // One name, one id: a converter that wrote a name under two ids made two training steps one "step"
        // (every other op renamed; held-out gearshift-format variant, session 28). Steps are found by name ids.
        std::string name = j.at(2).get<std::string>();
        auto [it, fresh] = name_index.try_emplace(name, static_cast<std::uint32_t>(out.names.size()));
        remap.push_back(it->second);
        if (fresh) out.names.push_back(std::move(name));
      } else if (tag == "k" || tag == "c" || tag == "s") {
        if (j.size() != 15) bad(fmt::format("op record needs 15 fields, has {}", j.size()));
        OpRecord r;
        r.kind = tag == "k" ? OpKind::kernel : tag == "c" ? OpKind::memcpy : OpKind::memset;
        auto id = j[1].get<std::uint32_t>();
        if (id >= remap.size()) bad(fmt::format("name id {} used before its definition", id));
        r.name_id = remap[id];
        r.start_ns = j[2].get<std::int64_t>();
        r.duration_ns = j[3].get<std::int64_t>();
        if (r.duration_ns < 0) bad(fmt::format("negative duration {} ns", r.duration_ns));
        r.device = j[4].get<std::int32_t>();
        r.stream = j[5].get<std::int32_t>();
        r.correlation = j[6].get<std::int64_t>();
        for (int d = 0; d < 3; ++d) {
          r.grid[d] = j[7].at(d).get<std::int32_t>();
          r.block[d] = j[8].at(d).get<std::int32_t>();
        }
        r.registers_per_thread = j[9].get<std::int32_t>();
        r.shared_memory_bytes = j[10].get<std::int32_t>();
        r.bytes = j[11].get<std::int64_t>();
        r.sm_clock_mhz = j[12].get<std::int32_t>();
        r.mem_clock_mhz = j[13].get<std::int32_t>();
        r.launch_ns = j[14].get<std::int64_t>();
        out.ops.push_back(r);
      } else if (tag == "m") {
        if (j.size() != 5) bad(fmt::format("marker record needs 5 fields, has {}", j.size()));
        out.markers.push_back(
            Marker{j.at(1).get<std::string>(), j.at(2).get<std::int64_t>(), j.at(3).get<std::int64_t>(),
                   j.at(4).get<int>() != 0});
      } else if (tag == "g") {
        if (j.size() != 3) bad(fmt::format("graph launch record needs 3 fields, has {}", j.size()));
        graph_of[j[1].get<std::int64_t>()] = j[2].get<std::uint32_t>();
      } else if (tag == "p") {
        if (j.size() != 6) bad(fmt::format("sample record needs 6 fields, has {}", j.size()));
        out.samples.push_back(DeviceSample{j[1].get<std::int32_t>(), j[2].get<std::int64_t>(),
                                           j[3].get<std::int32_t>(), j[4].get<std::int32_t>(),
                                           j[5].get<std::int32_t>()});
      } else if (tag == "y") {
        if (j.size() != 7) bad(fmt::format("synchronize record needs 7 fields, has {}", j.size()));
        SyncRecord y;
        const std::string scope = j[1].get<std::string>();
        if (scope == "device") y.scope = SyncRecord::Scope::device;
        else if (scope == "stream") y.scope = SyncRecord::Scope::stream;
        else if (scope == "event") y.scope = SyncRecord::Scope::event;
        else bad(fmt::format("synchronize scope '{}' (expected device, stream or event)", clip(scope, 40)));
        y.device = j[2].get<std::int32_t>();
        y.stream = j[3].get<std::int32_t>();
        y.correlation = j[4].get<std::int64_t>();
        y.enter_ns = j[5].get<std::int64_t>();
        y.duration_ns = j[6].get<std::int64_t>();
        if (y.duration_ns < 0) bad(fmt::format("negative synchronize duration {} ns", y.duration_ns));
        out.syncs.push_back(y);
      } else if (tag == "end") {
        trailer_line = lineno;
        const json& t = j.at(1);
        out.complete = t.value("complete", false);
        auto count = [&](const char* key) -> std::uint64_t {
          if (!t.contains(key)) return 0;
          if (!t[key].is_number_unsigned()) bad(fmt::format("trailer '{}' is not a count: {}", key, t[key].dump()));
          return t[key].get<std::uint64_t>();
        };
        trailer_records = t.contains("records") ? count("records")
                                                : out.ops.size() + out.markers.size() + out.samples.size() + out.syncs.size();
        if (t.contains("synchronizes") && !t["synchronizes"].is_boolean())
          bad(fmt::format("trailer 'synchronizes' is not true or false: {}", t["synchronizes"].dump()));
        trailer_syncs = t.value("synchronizes", false);
        dropped = count("dropped_records");
        note = t.contains("note") && t["note"].is_string() ? t["note"].get<std::string>() : "";
      } else {
        bad(fmt::format("unknown record tag '{}'", tag));
      }
    } catch (const json::exception& e) {
      bad(fmt::format("bad '{}' record: {}", tag, e.what()));
    }
  }
  if (!buf->error().empty()) throw TraceError(path, fmt::format("line {}: corrupt gzip data ({})", lineno, buf->error()));
  if (lineno == 0) throw TraceError(path, "empty file");
  const std::uint64_t records = out.ops.size() + out.markers.size() + out.samples.size() + out.syncs.size();
  // Without the trailer the file may end before the last synchronizes: not all of them are known.
  out.syncs_recorded = trailer_line != 0 && trailer_syncs;
  if (trailer_line == 0) {
    out.complete = false;
    out.health.has_trailer = false;
    out.health.warnings.push_back(
        "incomplete trace: no trailer (the producer was killed or the file was cut); only whole steps are used");
  } else {
    lineno = trailer_line;
    // Our writer counts ops, markers, samples and synchronizes; converters have counted the name lines too.
    if (trailer_records != records && trailer_records != records + remap.size())
      bad(fmt::format("the trailer counts {} records but the file holds {} (records were lost or added)",
                      trailer_records, records));
    out.health.dropped_records = dropped;
    std::string why = note.empty() ? "" : fmt::format(" ({})", clip(note, 200));
    if (dropped > 0) {
      double share = static_cast<double>(dropped) / static_cast<double>(records + dropped);
      if (share > kMaxDroppedRecordShare)
        bad(fmt::format("the producer dropped {} of {} records ({:.2f} %){}, more than the {:g} % a plan may miss",
                        dropped, records + dropped, 100 * share, why, 100 * kMaxDroppedRecordShare));
      out.complete = false;
      out.health.warnings.push_back(fmt::format(
          "incomplete trace: the producer dropped {} of {} records ({:.2f} %){}; steps that lost ops look shorter",
          dropped, records + dropped, 100 * share, why));
    } else if (!out.complete) {
      out.health.warnings.push_back(
          fmt::format("incomplete trace: the producer marked it incomplete{}; only whole steps are used", why));
    }
  }
  if (text.replaced_bytes() > 0)
    out.health.warnings.push_back(fmt::format("{} invalid UTF-8 bytes in names replaced by U+FFFD (first at byte {})",
                                              text.replaced_bytes(), text.first_replaced_at() + 1));
  std::stable_sort(out.ops.begin(), out.ops.end(),
                   [](const OpRecord& a, const OpRecord& b) { return a.start_ns < b.start_ns; });
  for (auto& r : out.ops)
    if (auto it = graph_of.find(r.correlation); it != graph_of.end()) r.graph_id = it->second;
  infer_graph_launches(out);  // files without "g" records: the ops sharing a graph launch's correlation
  std::stable_sort(out.markers.begin(), out.markers.end(),
                   [](const Marker& a, const Marker& b) { return a.start_ns < b.start_ns; });
  std::stable_sort(out.samples.begin(), out.samples.end(),
                   [](const DeviceSample& a, const DeviceSample& b) { return a.time_ns < b.time_ns; });
  std::stable_sort(out.syncs.begin(), out.syncs.end(),
                   [](const SyncRecord& a, const SyncRecord& b) { return a.enter_ns < b.enter_ns; });
  return out;
}

std::string what_file_is(std::string_view head) {
  if (head.empty()) return "";
  std::string_view h = head;
  if (h.starts_with("\xEF\xBB\xBF")) h.remove_prefix(3);  // a UTF-8 byte order mark
  const std::size_t at = h.find_first_not_of(" \t\r\n");
  if (at == std::string_view::npos) return "";
  const char first = h[at];
  if (first == '{' || first == '[') {
    // PyTorch's ExecutionTraceObserver (Chakra's JSON input): CPU operators and their tensors, no GPU times.
    if (h.find("\"schema\"") != std::string_view::npos &&
        (h.find("chakra") != std::string_view::npos || h.find("\"nodes\"") != std::string_view::npos))
      return "a PyTorch execution trace (ExecutionTraceObserver / Chakra: CPU operators, no GPU kernel times); record "
             "the same run with torch.profiler (CUDA activity on) or `gearshift trace`";
    return "";
  }
  if (head.size() > 262 && head.substr(257, 5) == "ustar") return "a tar archive: unpack it and pass the trace inside";
  if (head.starts_with("PK\x03\x04")) return "a zip archive: unpack it and pass the trace inside";
  if (head.starts_with("SQLite format 3")) return "an SQLite database (an Nsight Systems export?): gearshift reads "
                                                  "torch.profiler (Kineto) JSON traces and gearshift trace files";
  if (head.starts_with("\x1f\x8b")) return "gzip inside gzip: decompress it once";
  std::size_t binary = 0;
  for (unsigned char c : head) binary += c == 0 || (c < 0x20 && c != '\t' && c != '\n' && c != '\r');
  if (binary > 0) return "binary data, not JSON (a protobuf Chakra trace, an Nsight report?)";
  std::string line(h.substr(at, std::min<std::size_t>(h.find_first_of("\r\n", at) - at, 40)));
  if (line.find(',') != std::string::npos)
    return fmt::format("text that is not JSON (it begins '{}': a CSV? `gearshift pipeline` reads stage profiles)", line);
  return fmt::format("text that is not JSON (it begins '{}')", line);
}

Trace import_trace(const std::string& path) {
  // One read of the first bytes for both sniffs (the stream keeps a read error to itself: a truncated gzip reads
  // short here and the importer says where it ends).
  std::string head;
  try {
    GzStreamBuf buf(path);
    std::istream in(&buf);
    head.resize(512);
    in.read(head.data(), 512);
    head.resize(static_cast<std::size_t>(in.gcount()));
  } catch (const std::runtime_error&) {
    throw TraceError(path, "cannot open for reading (missing file or no permission)");
  }
  if (const std::string what = what_file_is(head); !what.empty())
    throw TraceError(path, "not a trace: " + what);
  const bool gearshift_format = head.substr(0, 64).find("\"gearshift-trace\"") != std::string::npos;  // its first line
  Trace t = gearshift_format ? read_gearshift_trace(path) : import_chrome_trace(path);
  sanitize_trace(t);  // the timing rules, once for every reader (trace/sanitize.hpp)
  check_time_unit(t, path);
  check_measured(t, path);
  return t;
}

}  // namespace gearshift::trace
