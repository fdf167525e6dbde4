#include "trace/chrome_import.hpp"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <istream>
#include <limits>
#include <optional>
#include <unordered_map>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "trace/error.hpp"
#include "trace/gz_stream.hpp"

namespace gearshift::trace {
namespace {

using json = nlohmann::json;

constexpr std::int64_t kMaxDurationNs = 3600LL * 1000 * 1000 * 1000;  // 1 h: no single GPU op runs longer

// A JSON number as it appeared: integers exactly, decimals as text so that µs -> ns is exact.
struct Number {
  bool present = false;
  bool is_integer = false;
  bool overflow = false;  // integer beyond uint64/int64 (parsed by nlohmann as float)
  std::int64_t integer = 0;
  double value = 0;
  std::string text;
};

// Exact µs -> ns for decimal text like "5154843554340.591" or "1.5e3"; nullopt when out of int64 range.
std::optional<std::int64_t> micros_to_ns(const Number& n) {
  if (!n.present) return std::nullopt;
  if (n.is_integer) {
    if (n.integer > std::numeric_limits<std::int64_t>::max() / 1000 ||
        n.integer < std::numeric_limits<std::int64_t>::min() / 1000)
      return std::nullopt;
    return n.integer * 1000;
  }
  const std::string& s = n.text;
  bool simple = !s.empty() && s.find_first_of("eE") == std::string::npos;
  if (simple) {
    std::size_t dot = s.find('.');
    std::string ip = s.substr(0, dot);
    std::string fp = dot == std::string::npos ? "" : s.substr(dot + 1);
    bool neg = !ip.empty() && ip[0] == '-';
    if (neg) ip.erase(0, 1);
    if (ip.size() > 16 || fp.find_first_not_of("0123456789") != std::string::npos ||
        ip.find_first_not_of("0123456789") != std::string::npos)
      return std::nullopt;
    std::int64_t whole = ip.empty() ? 0 : std::stoll(ip);
    if (whole > (std::numeric_limits<std::int64_t>::max() - 1000) / 1000) return std::nullopt;
    fp = (fp + "000").substr(0, 3);
    std::int64_t frac = std::stoll(fp);
    // round the 4th decimal digit (sub-ns) half up
    std::size_t dot2 = s.find('.');
    if (dot2 != std::string::npos && s.size() > dot2 + 4 && s[dot2 + 4] >= '5') frac += 1;
    std::int64_t ns = whole * 1000 + frac;
    return neg ? -ns : ns;
  }
  double v = n.value * 1000.0;
  if (!std::isfinite(v) || std::fabs(v) > 9.0e18) return std::nullopt;
  return static_cast<std::int64_t>(std::llround(v));
}

std::string lower(std::string s) {
  for (auto& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

enum class Frame { root, top_object, events, event, args, dims, meta, device_props, device_prop, skip };

struct PendingEvent {
  std::string ph, cat, name;
  Number ts, dur, pid, tid, stream, device, correlation, registers, shared_memory, bytes;
  std::string tid_text;
  std::array<std::int32_t, 3> grid{0, 0, 0}, block{0, 0, 0};
  void clear() { *this = PendingEvent{}; }
};

class Handler : public json::json_sax_t {
 public:
  Handler(std::string file, GzStreamBuf& buf, Trace& out) : file_(std::move(file)), buf_(buf), out_(out) {}

  bool null() override { return scalar(Number{}, nullptr); }
  bool boolean(bool) override { return scalar(Number{}, nullptr); }
  bool number_integer(number_integer_t v) override {
    Number n{true, true, false, v, static_cast<double>(v), {}};
    return scalar(n, nullptr);
  }
  bool number_unsigned(number_unsigned_t v) override {
    Number n{true, true, false, 0, static_cast<double>(v), {}};
    if (v > static_cast<number_unsigned_t>(std::numeric_limits<std::int64_t>::max())) {
      n.is_integer = false;
      n.overflow = true;
      n.text = std::to_string(v);
    } else {
      n.integer = static_cast<std::int64_t>(v);
    }
    return scalar(n, nullptr);
  }
  bool number_float(number_float_t v, const string_t& s) override {
    Number n{true, false, false, 0, v, s};
    return scalar(n, nullptr);
  }
  bool string(string_t& s) override { return scalar(Number{}, &s); }
  bool binary(binary_t&) override { return scalar(Number{}, nullptr); }

  bool start_object(std::size_t) override {
    Frame parent = stack_.empty() ? Frame::root : stack_.back();
    Frame f = Frame::skip;
    switch (parent) {
      case Frame::root: f = Frame::top_object; break;
      case Frame::top_object:
        f = key_ == "meta" ? Frame::meta : Frame::skip;
        break;
      case Frame::events:
        f = Frame::event;
        ev_.clear();
        ++event_index_;
        break;
      case Frame::event: f = key_ == "args" ? Frame::args : Frame::skip; break;
      case Frame::device_props: f = Frame::device_prop; break;
      default: f = Frame::skip;
    }
    stack_.push_back(f);
    key_.clear();
    return true;
  }
  bool end_object() override {
    Frame f = stack_.back();
    stack_.pop_back();
    if (f == Frame::event) finish_event();
    key_.clear();
    return true;
  }
  bool start_array(std::size_t) override {
    Frame parent = stack_.empty() ? Frame::root : stack_.back();
    Frame f = Frame::skip;
    if (parent == Frame::root) {
      f = Frame::events;  // 2020 format: a bare array of events
      out_.format = "chrome-trace (bare array)";
    } else if (parent == Frame::top_object && key_ == "traceEvents") {
      f = Frame::events;
    } else if (parent == Frame::top_object && key_ == "deviceProperties") {
      f = Frame::device_props;
    } else if (parent == Frame::args && (key_ == "grid" || key_ == "block")) {
      f = Frame::dims;
      dim_target_ = key_ == "grid" ? &ev_.grid : &ev_.block;
      dim_index_ = 0;
    }
    stack_.push_back(f);
    return true;
  }
  bool end_array() override {
    stack_.pop_back();
    key_.clear();
    return true;
  }
  bool key(string_t& k) override {
    key_ = k;
    return true;
  }
  bool parse_error(std::size_t position, const std::string&, const nlohmann::detail::exception& e) override {
    if (!buf_.error().empty())
      throw TraceError(file_, fmt::format("byte {}: truncated or corrupt gzip data ({})", position, buf_.error()));
    std::string what = e.what();
    if (position > 0 && buf_.position() + 1 >= position && what.find("end of input") != std::string::npos)
      throw TraceError(file_, fmt::format("byte {}: file ends in the middle of the JSON (truncated?)", position));
    throw TraceError(file_, fmt::format("byte {}: not valid JSON: {}", position, what));
  }

  std::size_t events_seen() const { return event_index_; }

 private:
  bool scalar(const Number& n, const std::string* s) {
    if (stack_.empty()) return true;
    switch (stack_.back()) {
      case Frame::event:
        if (s != nullptr) {
          if (key_ == "ph") ev_.ph = *s;
          else if (key_ == "cat") ev_.cat = *s;
          else if (key_ == "name") ev_.name = *s;
          else if (key_ == "tid") ev_.tid_text = *s;
        } else if (key_ == "ts") ev_.ts = n;
        else if (key_ == "dur") ev_.dur = n;
        else if (key_ == "tid") ev_.tid = n;
        else if (key_ == "pid") ev_.pid = n;
        break;
      case Frame::args:
        if (s != nullptr) break;
        if (key_ == "stream") ev_.stream = n;
        else if (key_ == "device") ev_.device = n;
        else if (key_ == "correlation") ev_.correlation = n;
        else if (key_ == "registers per thread") ev_.registers = n;
        else if (key_ == "shared memory") ev_.shared_memory = n;
        else if (key_ == "bytes") ev_.bytes = n;
        break;
      case Frame::dims:
        if (dim_index_ < 3 && n.present && n.is_integer) (*dim_target_)[dim_index_] = static_cast<std::int32_t>(n.integer);
        ++dim_index_;
        break;
      case Frame::meta: meta_scalar(n, s); break;
      case Frame::device_prop:
        if (s != nullptr && key_ == "name" && out_.gpu_name.empty()) out_.gpu_name = *s;
        break;
      default: break;
    }
    return true;
  }

  void meta_scalar(const Number& n, const std::string* s) {
    if (s != nullptr) meta_[key_] = *s;
    else if (n.present) meta_[key_] = n.is_integer ? json(n.integer) : json(n.value);
    else meta_[key_] = nullptr;
    if (!n.present) return;
    if (key_ == "s_per_iter" || key_ == "s_per_step") out_.measured.step_time_s = n.value;
    if (key_ == "J_per_iter" || key_ == "J_per_step") out_.measured.energy_per_step_j = n.value;
    if (key_ == "avg_W") out_.measured.average_power_w = n.value;
  }

  [[noreturn]] void fail(const std::string& what) const {
    throw TraceError(file_, fmt::format("event {} (near byte {}): {}", event_index_ - 1, buf_.position(), what));
  }

  static std::int32_t as_i32(const Number& n, std::int32_t fallback) {
    return n.present && n.is_integer ? static_cast<std::int32_t>(n.integer) : fallback;
  }

  void finish_event() {
    const std::string cat = lower(ev_.cat);
    std::optional<OpKind> kind;
    if (cat == "kernel") kind = OpKind::kernel;
    else if (cat == "gpu_memcpy" || cat == "memcpy") kind = OpKind::memcpy;
    else if (cat == "gpu_memset" || cat == "memset") kind = OpKind::memset;
    bool marker = (cat == "user_annotation" || cat == "gpu_user_annotation" || cat == "operator" || cat == "cpu_op") &&
                  (ev_.name.rfind("ProfilerStep#", 0) == 0 || ev_.name.rfind("gearshift.step", 0) == 0);
    bool runtime = cat == "cuda_runtime" || cat == "runtime" || cat == "cuda_driver";
    if (runtime) {
      // Launch calls: their CPU time places each kernel in the CPU-side step that launched it.
      auto ts = micros_to_ns(ev_.ts);
      if (ts && ev_.correlation.present && ev_.correlation.is_integer) launches_[ev_.correlation.integer] = *ts;
      return;
    }
    if (!kind && !marker) return;
    if (ev_.ph != "X" && !ev_.ph.empty()) return;  // only complete events carry a duration
    if (ev_.name.empty()) fail(fmt::format("{} event without a name", ev_.cat));
    if (!ev_.ts.present) fail(fmt::format("{} '{}' without ts", ev_.cat, short_name()));
    if (!ev_.dur.present) fail(fmt::format("{} '{}' without dur", ev_.cat, short_name()));
    auto ts = micros_to_ns(ev_.ts);
    auto dur = micros_to_ns(ev_.dur);
    if (!ts) fail(fmt::format("{} '{}' has an absurd timestamp {}", ev_.cat, short_name(), ev_.ts.value));
    if (!dur) fail(fmt::format("{} '{}' has an absurd duration {} µs", ev_.cat, short_name(), ev_.dur.value));
    if (*dur < 0) fail(fmt::format("{} '{}' has a negative duration {} µs", ev_.cat, short_name(), ev_.dur.value));
    if (*dur > kMaxDurationNs)
      fail(fmt::format("{} '{}' has an absurd duration {} µs (> 1 h)", ev_.cat, short_name(), ev_.dur.value));
    if (marker) {
      out_.markers.push_back(Marker{ev_.name, *ts, *dur, cat == "gpu_user_annotation"});
      return;
    }
    OpRecord r;
    r.kind = *kind;
    r.name_id = intern(ev_.name);
    r.start_ns = *ts;
    r.duration_ns = *dur;
    r.device = as_i32(ev_.device, as_i32(ev_.pid, 0));
    r.stream = as_i32(ev_.stream, as_i32(ev_.tid, stream_from_text(ev_.tid_text)));
    r.correlation = ev_.correlation.present && ev_.correlation.is_integer ? ev_.correlation.integer : -1;
    r.grid = ev_.grid;
    r.block = ev_.block;
    r.registers_per_thread = as_i32(ev_.registers, 0);
    r.shared_memory_bytes = as_i32(ev_.shared_memory, 0);
    r.bytes = ev_.bytes.present && ev_.bytes.is_integer ? ev_.bytes.integer : 0;
    out_.ops.push_back(r);
  }

  public:
  void resolve_launches() {
    if (launches_.empty()) return;
    for (auto& r : out_.ops) {
      auto it = launches_.find(r.correlation);
      if (r.correlation >= 0 && it != launches_.end()) r.launch_ns = it->second;
    }
  }

  private:
  std::string short_name() const { return ev_.name.size() > 60 ? ev_.name.substr(0, 57) + "..." : ev_.name; }

  static std::int32_t stream_from_text(const std::string& t) {
    std::string digits;
    for (char c : t)
      if (std::isdigit(static_cast<unsigned char>(c))) digits += c;
    if (digits.empty() || digits.size() > 9) return 0;
    return std::stoi(digits);
  }

  std::uint32_t intern(const std::string& name) {
    auto it = ids_.find(name);
    if (it != ids_.end()) return it->second;
    auto id = static_cast<std::uint32_t>(out_.names.size());
    out_.names.push_back(name);
    ids_.emplace(name, id);
    return id;
  }

 public:
  json meta_ = json::object();

 private:
  std::string file_;
  GzStreamBuf& buf_;
  Trace& out_;
  std::vector<Frame> stack_;
  std::string key_;
  PendingEvent ev_;
  std::size_t event_index_ = 0;
  std::array<std::int32_t, 3>* dim_target_ = nullptr;
  std::size_t dim_index_ = 0;
  std::unordered_map<std::string, std::uint32_t> ids_;
  std::unordered_map<std::int64_t, std::int64_t> launches_;  // correlation -> launch CPU time, ns
};

}  // namespace

Trace import_chrome_trace(const std::string& path, const ChromeImportOptions& options) {
  Trace out;
  out.source = path;
  out.format = "chrome-trace";
  std::unique_ptr<GzStreamBuf> buf = open_trace_file(path);
  std::istream in(buf.get());
  Handler handler(path, *buf, out);
  bool ok = false;
  try {
    ok = json::sax_parse(in, &handler);
  } catch (const TraceError&) {
    throw;
  } catch (const std::exception& e) {
    throw TraceError(path, fmt::format("byte {}: {}", buf->position(), e.what()));
  }
  if (!ok) throw TraceError(path, "not a Chrome trace JSON file");
  if (!buf->error().empty())
    throw TraceError(path, fmt::format("byte {}: truncated or corrupt gzip data ({})", buf->position(), buf->error()));
  out.meta_json = handler.meta_.dump();
  handler.resolve_launches();
  if (options.require_kernels && out.kernel_count() == 0)
    throw TraceError(path, fmt::format("no kernel events among {} events (is this a torch.profiler trace with "
                                       "CUDA activity enabled?)",
                                       handler.events_seen()));
  std::stable_sort(out.ops.begin(), out.ops.end(), [](const OpRecord& a, const OpRecord& b) {
    return a.start_ns != b.start_ns ? a.start_ns < b.start_ns : a.stream < b.stream;
  });
  std::stable_sort(out.markers.begin(), out.markers.end(),
                   [](const Marker& a, const Marker& b) { return a.start_ns < b.start_ns; });
  return out;
}

}  // namespace gearshift::trace
