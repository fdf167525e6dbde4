#include "trace/chrome_import.hpp"

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cmath>
#include <cstdlib>
#include <istream>
#include <limits>
#include <optional>
#include <string_view>
#include <unordered_map>
#include <unordered_set>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "trace/error.hpp"
#include "trace/graph_units.hpp"
#include "trace/gz_stream.hpp"

namespace gearshift::trace {
namespace {

using json = nlohmann::json;
using namespace std::string_view_literals;  // key_ == "ts"sv: a length check, then memcmp, all inline

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

// A number written as a JSON string ("ts": "5154861704176.982", Ascend/pytorch#133): read exactly as the same
// text would be read as a number. nullopt when the text is not a JSON number (no spaces, no leading '+').
std::optional<Number> number_from_text(const std::string& s) {
  auto digit = [&](std::size_t i) { return i < s.size() && s[i] >= '0' && s[i] <= '9'; };
  std::size_t i = 0;
  if (i < s.size() && s[i] == '-') ++i;
  if (!digit(i)) return std::nullopt;
  if (s[i] == '0') ++i;
  else
    while (digit(i)) ++i;
  bool integer = true;
  if (i < s.size() && s[i] == '.') {
    integer = false;
    if (!digit(++i)) return std::nullopt;
    while (digit(i)) ++i;
  }
  if (i < s.size() && (s[i] == 'e' || s[i] == 'E')) {
    integer = false;
    ++i;
    if (i < s.size() && (s[i] == '+' || s[i] == '-')) ++i;
    if (!digit(i)) return std::nullopt;
    while (digit(i)) ++i;
  }
  if (i != s.size()) return std::nullopt;
  Number n;
  n.present = true;
  n.text = s;
  n.value = std::strtod(s.c_str(), nullptr);
  if (integer) {
    auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), n.integer);
    n.is_integer = ec == std::errc() && end == s.data() + s.size();
    n.overflow = !n.is_integer;
  }
  return n;
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
  bool string_number = false;  // ts or dur was a numeric string
  const char* bad_key = nullptr;  // "ts" or "dur" when it was a string that is not a number
  std::string bad_text;
  std::array<std::int32_t, 3> grid{0, 0, 0}, block{0, 0, 0};
  void clear() { *this = PendingEvent{}; }
};

class Handler : public json::json_sax_t {
 public:
  Handler(std::string file, GzStreamBuf& gz, Utf8RepairStreamBuf& text, Trace& out)
      : file_(std::move(file)), gz_(gz), text_(text), out_(out) {}

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
    started_ = true;
    Frame parent = stack_.empty() ? Frame::root : stack_.back();
    Frame f = Frame::skip;
    switch (parent) {
      case Frame::root: f = Frame::top_object; break;
      case Frame::top_object:
        f = key_ == "meta"sv ? Frame::meta : Frame::skip;
        break;
      case Frame::events:
        f = Frame::event;
        ev_.clear();
        ++event_index_;
        break;
      case Frame::event: f = key_ == "args"sv ? Frame::args : Frame::skip; break;
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
    started_ = true;
    Frame parent = stack_.empty() ? Frame::root : stack_.back();
    Frame f = Frame::skip;
    if (parent == Frame::root) {
      f = Frame::events;  // 2020 format: a bare array of events
      out_.format = "chrome-trace (bare array)";
    } else if (parent == Frame::top_object && key_ == "traceEvents"sv) {
      f = Frame::events;
    } else if (parent == Frame::top_object && key_ == "deviceProperties"sv) {
      f = Frame::device_props;
    } else if (parent == Frame::args && key_ == "Input Dims"sv) {
      out_.profiler.shapes = true;  // record_shapes: the array itself is not needed
    } else if (parent == Frame::args && (key_ == "grid"sv || key_ == "block"sv)) {
      f = Frame::dims;
      dim_target_ = key_ == "grid"sv ? &ev_.grid : &ev_.block;
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
  // `position` counts the repaired text's bytes read, the failing one included (1-based); reported as the
  // 1-based position in the decompressed file.
  bool parse_error(std::size_t position, const std::string& last_token, const nlohmann::detail::exception& e) override {
    std::uint64_t byte = source_byte(position);
    if (!gz_.error().empty())
      throw TraceError(file_, fmt::format("byte {}: truncated or corrupt gzip data ({})", byte, gz_.error()));
    if (position > text_.position()) {  // the parser read past the last byte
      if (!started_) throw TraceError(file_, fmt::format("byte {}: no JSON value in the file (only white space)", byte));
      throw TraceError(file_, fmt::format("byte {}: file ends in the middle of the JSON (truncated?)", byte));
    }
    if (auto literal = non_json_literal(last_token)) {
      std::string where = in_event() ? fmt::format("event {}: ", event_index_ - 1) : "";
      std::string what = key_.empty() ? "a value" : key_;
      throw TraceError(file_, fmt::format("byte {}: {}{} is {} (not valid JSON; Python's json.dumps writes it for a "
                                          "float {})",
                                          byte, where, what, *literal, *literal == "NaN" ? "nan" : "inf"));
    }
    // nlohmann's message names line and column of the repaired text; keep its reason, name our position.
    std::string what = e.what();
    std::size_t line = 0;
    static const std::string kAt = "parse error at line ";
    if (auto at = what.find(kAt); at != std::string::npos) {
      line = std::strtoul(what.c_str() + at + kAt.size(), nullptr, 10);
      if (auto colon = what.find(": ", at); colon != std::string::npos) what = what.substr(colon + 2);
    }
    throw TraceError(file_, fmt::format("byte {}{}: not valid JSON: {}", byte,
                                        line > 1 ? fmt::format(" (line {})", line) : "", what));
  }

  std::size_t events_seen() const { return event_index_; }
  std::size_t string_number_events() const { return string_number_events_; }

  // 1-based byte of the decompressed file for the parser's 1-based position in the repaired text.
  std::uint64_t source_byte(std::uint64_t position) const {
    return position == 0 ? 0 : text_.source_position(position - 1) + 1;
  }

 private:
  bool in_event() const {
    return std::find(stack_.begin(), stack_.end(), Frame::event) != stack_.end();
  }

  // NaN, Infinity or -Infinity where the parser stopped (it reads "N", "I" or "-I" of them); nullopt otherwise.
  std::optional<std::string> non_json_literal(const std::string& last_token) {
    if (last_token.empty()) return std::nullopt;
    char c = last_token.back();
    bool minus = last_token.size() >= 2 && last_token[last_token.size() - 2] == '-';
    const char* rest = c == 'N' ? "aN" : c == 'I' ? "nfinity" : nullptr;
    if (rest == nullptr) return std::nullopt;
    for (const char* r = rest; *r != 0; ++r)  // the parser has stopped: reading on costs nothing
      if (text_.sbumpc() != *r) return std::nullopt;
    return c == 'N' ? std::string("NaN") : minus ? std::string("-Infinity") : std::string("Infinity");
  }

  bool scalar(const Number& n, const std::string* s) {
    if (stack_.empty()) return true;
    switch (stack_.back()) {
      case Frame::event:
        if (s != nullptr) {
          if (key_ == "ph"sv) ev_.ph = *s;
          else if (key_ == "cat"sv) ev_.cat = *s;
          else if (key_ == "name"sv) ev_.name = *s;
          else if (key_ == "tid"sv) ev_.tid_text = *s;
          else if (key_ == "ts"sv || key_ == "dur"sv) {
            if (auto num = number_from_text(*s)) {
              (key_ == "ts"sv ? ev_.ts : ev_.dur) = *num;
              ev_.string_number = true;
            } else {
              ev_.bad_key = key_ == "ts"sv ? "ts" : "dur";
              ev_.bad_text = *s;
            }
          }
        } else if (key_ == "ts"sv) ev_.ts = n;
        else if (key_ == "dur"sv) ev_.dur = n;
        else if (key_ == "tid"sv) ev_.tid = n;
        else if (key_ == "pid"sv) ev_.pid = n;
        break;
      case Frame::args:
        if (s != nullptr) break;
        if (key_ == "stream"sv) ev_.stream = n;
        else if (key_ == "device"sv) ev_.device = n;
        else if (key_ == "correlation"sv) ev_.correlation = n;
        else if (key_ == "registers per thread"sv) ev_.registers = n;
        else if (key_ == "shared memory"sv) ev_.shared_memory = n;
        else if (key_ == "bytes"sv) ev_.bytes = n;
        break;
      case Frame::dims:
        if (dim_index_ < 3 && n.present && n.is_integer) (*dim_target_)[dim_index_] = static_cast<std::int32_t>(n.integer);
        ++dim_index_;
        break;
      case Frame::meta: meta_scalar(n, s); break;
      case Frame::device_prop:
        if (s != nullptr && key_ == "name"sv && out_.gpu_name.empty()) out_.gpu_name = *s;
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
    if (key_ == "s_per_iter"sv || key_ == "s_per_step"sv) out_.measured.step_time_s = n.value;
    if (key_ == "J_per_iter"sv || key_ == "J_per_step"sv) out_.measured.energy_per_step_j = n.value;
    if (key_ == "avg_W"sv) out_.measured.average_power_w = n.value;
  }

  [[noreturn]] void fail(const std::string& what) const {
    throw TraceError(file_, fmt::format("event {} (near byte {}): {}", event_index_ - 1, text_.source_position(), what));
  }

  static std::int32_t as_i32(const Number& n, std::int32_t fallback) {
    return n.present && n.is_integer ? static_cast<std::int32_t>(n.integer) : fallback;
  }

  // The profiler's own CPU-side records (trace::ProfilerRecords): what tracing cost the job's CPU.
  void count_profiler_record(const std::string& cat, bool cpu_op, bool runtime) {
    const bool python = cat == "python_function"sv;
    if (!cpu_op && !runtime && !python) return;
    (cpu_op ? out_.profiler.cpu_ops : runtime ? out_.profiler.runtime_calls : out_.profiler.python_functions) += 1;
    if (auto ts = micros_to_ns(ev_.ts)) {
      ProfilerRecords& p = out_.profiler;
      const bool first = p.first_ns == 0 && p.last_ns == 0;
      p.first_ns = first ? *ts : std::min(p.first_ns, *ts);
      p.last_ns = first ? *ts : std::max(p.last_ns, *ts);
    }
  }

  void finish_event() {
    const std::string cat = lower(ev_.cat);
    std::optional<OpKind> kind;
    if (cat == "kernel"sv) kind = OpKind::kernel;
    else if (cat == "gpu_memcpy"sv || cat == "memcpy"sv) kind = OpKind::memcpy;
    else if (cat == "gpu_memset"sv || cat == "memset"sv) kind = OpKind::memset;
    const bool annotation =
        cat == "user_annotation"sv || cat == "gpu_user_annotation"sv || cat == "operator"sv || cat == "cpu_op"sv;
    // torch.optim.Optimizer.step's profiler hook names its range "Optimizer.step#<class>.step" (CPU side).
    const bool optimizer_range = annotation && cat != "gpu_user_annotation"sv && ev_.name.rfind("Optimizer.step#", 0) == 0;
    bool marker = optimizer_range ||
                  (annotation && (ev_.name.rfind("ProfilerStep#", 0) == 0 || ev_.name.rfind("gearshift.step", 0) == 0));
    bool runtime = cat == "cuda_runtime"sv || cat == "runtime"sv || cat == "cuda_driver"sv;
    count_profiler_record(cat, annotation && cat != "gpu_user_annotation"sv, runtime);
    if (runtime) {
      runtime_events_ = true;
      // Launch calls: their CPU time places each kernel in the CPU-side step that launched it.
      auto ts = micros_to_ns(ev_.ts);
      if (ts && ev_.correlation.present && ev_.correlation.is_integer) {
        launches_[ev_.correlation.integer] = *ts;
        if (is_graph_launch(ev_.name)) graph_launches_.insert(ev_.correlation.integer);
      }
      if (auto scope = sync_scope(ev_.name); scope && ts && (ev_.ph == "X"sv || ev_.ph.empty())) {
        auto dur = micros_to_ns(ev_.dur);
        if (!dur || *dur < 0 || *dur > kMaxDurationNs)
          fail(fmt::format("{} '{}' has no valid duration", ev_.cat, short_name()));
        SyncRecord y;
        y.scope = *scope;
        y.stream = y.scope == SyncRecord::Scope::stream ? as_i32(ev_.stream, -1) : -1;
        y.correlation = ev_.correlation.present && ev_.correlation.is_integer ? ev_.correlation.integer : -1;
        y.enter_ns = *ts;
        y.duration_ns = *dur;
        (cat == "cuda_driver"sv ? driver_syncs_ : out_.syncs).push_back(y);
      }
      return;
    }
    if (!kind && !marker) return;
    if (ev_.ph != "X"sv && !ev_.ph.empty()) return;  // only complete events carry a duration
    if (ev_.name.empty()) fail(fmt::format("{} event without a name", ev_.cat));
    if (ev_.bad_key != nullptr)
      fail(fmt::format("{} '{}': {} is a string that is not a number: \"{}\"", ev_.cat, short_name(), ev_.bad_key,
                       ev_.bad_text.size() > 40 ? ev_.bad_text.substr(0, 37) + "..." : ev_.bad_text));
    if (!ev_.ts.present) fail(fmt::format("{} '{}' without ts", ev_.cat, short_name()));
    if (!ev_.dur.present) fail(fmt::format("{} '{}' without dur", ev_.cat, short_name()));
    auto ts = micros_to_ns(ev_.ts);
    auto dur = micros_to_ns(ev_.dur);
    if (!ts) fail(fmt::format("{} '{}' has an absurd timestamp {}", ev_.cat, short_name(), ev_.ts.value));
    if (!dur) fail(fmt::format("{} '{}' has an absurd duration {} µs", ev_.cat, short_name(), ev_.dur.value));
    if (*dur < 0) fail(fmt::format("{} '{}' has a negative duration {} µs", ev_.cat, short_name(), ev_.dur.value));
    if (*dur > kMaxDurationNs)
      fail(fmt::format("{} '{}' has an absurd duration {} µs (> 1 h)", ev_.cat, short_name(), ev_.dur.value));
    if (ev_.string_number) ++string_number_events_;
    if (marker) {
      (optimizer_range ? out_.optimizer_ranges : out_.markers)
          .push_back(Marker{ev_.name, *ts, *dur, cat == "gpu_user_annotation"sv});
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
  // The runtime's synchronizes, and the driver's not made inside one (a runtime synchronize calls the driver's:
  // the same wait, counted once). Syncs are recorded when the profiler kept CUDA runtime events at all.
  void resolve_syncs() {
    out_.syncs_recorded = runtime_events_;
    auto by_enter = [](const SyncRecord& a, const SyncRecord& b) { return a.enter_ns < b.enter_ns; };
    std::stable_sort(out_.syncs.begin(), out_.syncs.end(), by_enter);
    const std::size_t runtime_syncs = out_.syncs.size();
    for (const SyncRecord& d : driver_syncs_) {
      auto it = std::upper_bound(out_.syncs.begin(), out_.syncs.begin() + static_cast<std::ptrdiff_t>(runtime_syncs), d,
                                 by_enter);
      const bool inside = it != out_.syncs.begin() && std::prev(it)->exit_ns() >= d.exit_ns();
      if (!inside) out_.syncs.push_back(d);
    }
    std::stable_sort(out_.syncs.begin(), out_.syncs.end(), by_enter);
  }

  void resolve_launches() {
    if (launches_.empty()) return;
    for (auto& r : out_.ops) {
      auto it = launches_.find(r.correlation);
      if (r.correlation >= 0 && it != launches_.end()) r.launch_ns = it->second;
    }
  }

  // Correlation ids of the cudaGraphLaunch / cuGraphLaunch calls: every op of one launch carries its id.
  const std::unordered_set<std::int64_t>& graph_launches() const { return graph_launches_; }

  private:
  static bool is_graph_launch(std::string_view name) {
    for (std::string_view suffix : {"_ptsz"sv, "_v10000"sv})
      if (name.ends_with(suffix)) name.remove_suffix(suffix.size());
    return name == "cudaGraphLaunch"sv || name == "cuGraphLaunch"sv;
  }

  // cudaDeviceSynchronize, cudaStreamSynchronize, cudaEventSynchronize and the driver's (cuCtx/cuStream/
  // cuEventSynchronize, with their _v2 / _ptsz variants); none for any other call.
  static std::optional<SyncRecord::Scope> sync_scope(std::string_view name) {
    for (std::string_view suffix : {"_ptsz"sv, "_v2"sv})
      if (name.ends_with(suffix)) name.remove_suffix(suffix.size());
    if (name == "cudaDeviceSynchronize"sv || name == "cudaThreadSynchronize"sv || name == "cuCtxSynchronize"sv)
      return SyncRecord::Scope::device;
    if (name == "cudaStreamSynchronize"sv || name == "cuStreamSynchronize"sv) return SyncRecord::Scope::stream;
    if (name == "cudaEventSynchronize"sv || name == "cuEventSynchronize"sv) return SyncRecord::Scope::event;
    return std::nullopt;
  }

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
  GzStreamBuf& gz_;
  Utf8RepairStreamBuf& text_;
  Trace& out_;
  bool started_ = false;  // the parser has seen the document's first value
  std::size_t string_number_events_ = 0;
  std::vector<Frame> stack_;
  std::string key_;
  PendingEvent ev_;
  std::size_t event_index_ = 0;
  std::array<std::int32_t, 3>* dim_target_ = nullptr;
  std::size_t dim_index_ = 0;
  std::unordered_map<std::string, std::uint32_t> ids_;
  std::unordered_map<std::int64_t, std::int64_t> launches_;  // correlation -> launch CPU time, ns
  bool runtime_events_ = false;          // the profiler kept CUDA runtime/driver API events
  std::unordered_set<std::int64_t> graph_launches_;  // correlation ids of graph launch calls
  std::vector<SyncRecord> driver_syncs_;  // cuda_driver synchronizes, kept unless inside a runtime one
};

}  // namespace

Trace import_chrome_trace(const std::string& path, const ChromeImportOptions& options) {
  Trace out;
  out.source = path;
  out.format = "chrome-trace";
  std::unique_ptr<GzStreamBuf> buf = open_trace_file(path);
  Utf8RepairStreamBuf text(*buf);  // ill-formed UTF-8 becomes U+FFFD: nlohmann-json would reject it
  auto gzip_error = [&] {
    if (!buf->error().empty())
      throw TraceError(path, fmt::format("byte {}: truncated or corrupt gzip data ({})", text.source_position() + 1,
                                         buf->error()));
  };
  if (text.sgetc() == std::char_traits<char>::eof()) {
    gzip_error();
    throw TraceError(path, buf->compressed() ? "empty file (gzip of nothing)" : "empty file");
  }
  std::istream in(&text);
  Handler handler(path, *buf, text, out);
  bool ok = false;
  try {
    // Not strict: the parser stops after the document's last byte, and the rest is checked below, so that
    // data after the document is not reported as a truncated file.
    ok = json::sax_parse(in, &handler, json::input_format_t::json, /*strict=*/false);
  } catch (const TraceError&) {
    throw;
  } catch (const std::exception& e) {
    throw TraceError(path, fmt::format("byte {}: {}", text.source_position(), e.what()));
  }
  if (!ok) throw TraceError(path, "not a Chrome trace JSON file");
  gzip_error();
  std::uint64_t document_end = text.source_position();
  for (auto c = text.sbumpc(); c != std::char_traits<char>::eof(); c = text.sbumpc()) {
    if (c == ' ' || c == '\t' || c == '\n' || c == '\r') continue;
    throw TraceError(path, fmt::format("data after the end of the JSON document at byte {} (the document ends at "
                                       "byte {})",
                                       text.source_position(text.position() - 1) + 1, document_end));
  }
  gzip_error();
  out.meta_json = handler.meta_.dump();
  handler.resolve_launches();
  handler.resolve_syncs();
  if (text.replaced_bytes() > 0)
    out.health.warnings.push_back(fmt::format("{} invalid UTF-8 bytes in names or other strings replaced by U+FFFD "
                                              "(first at byte {})",
                                              text.replaced_bytes(), text.first_replaced_at() + 1));
  if (handler.string_number_events() > 0)
    out.health.warnings.push_back(fmt::format("{} GPU ops and step markers give ts or dur as a string "
                                              "(read as the number it spells)",
                                              handler.string_number_events()));
  if (options.require_kernels && out.kernel_count() == 0)
    throw TraceError(path, fmt::format("no kernel events among {} events (is this a torch.profiler trace with "
                                       "CUDA activity enabled?)",
                                       handler.events_seen()));
  std::stable_sort(out.ops.begin(), out.ops.end(), [](const OpRecord& a, const OpRecord& b) {
    return a.start_ns != b.start_ns ? a.start_ns < b.start_ns : a.stream < b.stream;
  });
  std::stable_sort(out.markers.begin(), out.markers.end(),
                   [](const Marker& a, const Marker& b) { return a.start_ns < b.start_ns; });
  std::stable_sort(out.optimizer_ranges.begin(), out.optimizer_ranges.end(),
                   [](const Marker& a, const Marker& b) { return a.start_ns < b.start_ns; });
  // A graph launch is one unit for the template and the plan (no clock change inside it), as in the gearshift
  // format: the ops of one cudaGraphLaunch runtime event share its correlation id. Only those: exporters also
  // repeat an id where no graph ran. Before, Chrome traces were never grouped, and a plan changed clocks inside
  // a 974-op graph launch (held-out traces, session 28).
  if (!handler.graph_launches().empty()) infer_graph_launches(out, &handler.graph_launches());
  return out;
}

}  // namespace gearshift::trace
