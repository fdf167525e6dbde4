#include "cupti/tracer.hpp"

#include <cxxabi.h>

#include <algorithm>
#include <cstdlib>
#include <memory>

namespace gearshift::cupti {
namespace {

constexpr std::size_t kMaxOpenRanges = 65536;
constexpr std::size_t kMaxRanges = 4'000'000;

const char* copy_kind_name(int k) {
  // CUpti_ActivityMemcpyKind values 0..10 (cupti_activity.h).
  static const char* const names[] = {"Unknown", "HtoD", "DtoH", "HtoA", "AtoH", "AtoA",
                                      "AtoD",    "DtoA", "DtoD", "HtoH", "PtoP"};
  return k >= 0 && k < 11 ? names[k] : "Unknown";
}

const char* memory_kind_name(int k) {
  // CUpti_ActivityMemoryKind values 0..7.
  static const char* const names[] = {"Unknown", "Pageable", "Pinned",         "Device",
                                      "Array",   "Managed",  "Device Static", "Managed Static"};
  return k >= 0 && k < 8 ? names[k] : "Unknown";
}

}  // namespace

std::string memcpy_label(int copy_kind, int src_kind, int dst_kind) {
  return std::string("Memcpy ") + copy_kind_name(copy_kind) + " (" + memory_kind_name(src_kind) + " -> " +
         memory_kind_name(dst_kind) + ")";
}

std::string memset_label(int memory_kind) { return std::string("Memset (") + memory_kind_name(memory_kind) + ")"; }

std::string demangle(std::string_view mangled) {
  std::string s(mangled);
  if (!s.starts_with("_Z")) return s;
  int status = 0;
  std::unique_ptr<char, decltype(&std::free)> out(abi::__cxa_demangle(s.c_str(), nullptr, nullptr, &status),
                                                  &std::free);
  return status == 0 && out ? std::string(out.get()) : s;
}

Tracer::Tracer(const TracerConfig& config, const LaunchTable* launches, const std::string& source,
               const std::string& gpu_name, const std::string& meta_json)
    : config_(config), launches_(launches), writer_(config.output, source, gpu_name, meta_json) {}

const std::string& Tracer::demangled(std::string_view mangled) {
  auto it = names_.find(std::string(mangled));
  if (it == names_.end()) it = names_.emplace(std::string(mangled), demangle(mangled)).first;
  return it->second;
}

void Tracer::add(const GpuActivity& a) {
  std::lock_guard lock(mu_);
  if (finished()) {
    ++stats_.after_stop;
    return;
  }
  trace::OpRecord r;
  r.kind = a.kind;
  r.start_ns = a.start_ns;
  r.duration_ns = std::max<std::int64_t>(0, a.end_ns - a.start_ns);
  r.device = static_cast<std::int32_t>(a.device);
  r.stream = static_cast<std::int32_t>(a.stream);
  r.correlation = a.correlation;
  if (launches_ != nullptr && a.correlation != 0) r.launch_ns = launches_->launch_time(a.correlation);
  // A graph's ops carry the id the launch callback saw (the launch feed names the launch by it), else CUPTI's.
  if (a.graph_id != 0) {
    const std::uint32_t at_launch = launches_ != nullptr ? launches_->graph_id(a.correlation) : 0;
    r.graph_id = at_launch != 0 ? at_launch : a.graph_id;
  }
  r.grid = a.grid;
  r.block = a.block;
  r.registers_per_thread = a.registers_per_thread;
  r.shared_memory_bytes = a.shared_memory_bytes;
  r.bytes = a.bytes;
  if (auto s = timeline_.nearest(r.device, r.start_ns + r.duration_ns / 2)) {
    r.sm_clock_mhz = s->sm_clock_mhz;
    r.mem_clock_mhz = s->mem_clock_mhz;
  }
  switch (a.kind) {
    case trace::OpKind::kernel: ++stats_.kernels; break;
    case trace::OpKind::memcpy: ++stats_.memcpys; break;
    case trace::OpKind::memset: ++stats_.memsets; break;
  }
  LaunchApi api = launches_ != nullptr && a.correlation != 0 ? launches_->lookup(a.correlation) : LaunchApi::unknown;
  if (a.kind == trace::OpKind::kernel && api == LaunchApi::unknown) ++stats_.uncorrelated;
  if (a.graph_id != 0 || api == LaunchApi::graph) {
    if (a.kind == trace::OpKind::kernel) ++stats_.graph_kernels;
    auto [it, fresh] = graph_launches_.try_emplace(a.correlation, GraphSpan{a.start_ns, a.end_ns, a.graph_id});
    if (!fresh) {
      it->second.start_ns = std::min(it->second.start_ns, a.start_ns);
      it->second.end_ns = std::max(it->second.end_ns, a.end_ns);
    }
  }
  writer_.write(r, demangled(a.name));
  ++records_;
  if (!writer_.ok() && !stop_) stop_ = "cannot write the trace: " + writer_.error();
  if (records_ >= config_.max_records && !stop_)
    stop_ = "record cap reached (" + std::to_string(config_.max_records) + " records)";
}

void Tracer::add(const MarkerActivity& m) {
  std::lock_guard lock(mu_);
  if (finished()) {
    ++stats_.after_stop;
    return;
  }
  switch (m.phase) {
    case MarkerActivity::Phase::instant:
      if (!config_.all_ranges) return;
      if (ranges_.size() < kMaxRanges) ranges_.push_back(trace::Marker{std::string(m.name), m.timestamp_ns, 0, false});
      else ++stats_.dropped_ranges;
      return;
    case MarkerActivity::Phase::start:
      if (open_ranges_.size() >= kMaxOpenRanges) {
        ++stats_.dropped_ranges;
        return;
      }
      open_ranges_[m.id] = OpenRange{std::string(m.name), m.timestamp_ns};
      return;
    case MarkerActivity::Phase::end: {
      auto it = open_ranges_.find(m.id);
      if (it == open_ranges_.end()) return;  // its start was dropped (already counted)
      OpenRange o = std::move(it->second);
      open_ranges_.erase(it);
      if (ranges_.size() >= kMaxRanges) {
        ++stats_.dropped_ranges;
        return;
      }
      ++stats_.ranges;
      bool step = is_step_marker(o.name);
      if (!step && !config_.all_ranges) return;
      ranges_.push_back(trace::Marker{std::move(o.name), o.start_ns, std::max<std::int64_t>(0, m.timestamp_ns - o.start_ns), false});
      if (step) {
        ++stats_.step_ranges;
        if (config_.steps > 0 && stats_.step_ranges >= static_cast<std::uint64_t>(config_.steps) && !stop_)
          stop_ = "traced " + std::to_string(config_.steps) + " steps";
      }
      return;
    }
  }
}

void Tracer::add(const trace::DeviceSample& s) {
  timeline_.add(s);
  std::lock_guard lock(mu_);
  if (finished()) return;
  writer_.write(s);
  ++stats_.samples;
  if (!writer_.ok() && !stop_) stop_ = "cannot write the trace: " + writer_.error();
}

void Tracer::add(const trace::SyncRecord& y) {
  if (finished()) return;
  std::lock_guard lock(sync_mu_);
  if (syncs_.size() >= kMaxRanges) {
    sync_dropped_ = true;
    return;
  }
  syncs_.push_back(y);
}

void Tracer::add_dropped(std::uint64_t cupti_records, std::uint64_t refused_buffers) {
  std::lock_guard lock(mu_);
  stats_.dropped_cupti += cupti_records;
  stats_.dropped_buffers += refused_buffers;
}

std::optional<std::string> Tracer::stop_reason() const {
  std::lock_guard lock(mu_);
  return stop_;
}

void Tracer::finish(bool complete, const std::string& note) {
  std::lock_guard lock(mu_);
  if (finished()) return;
  std::size_t unclosed = open_ranges_.size();  // normal when stopped mid-step: noted, not counted as dropped
  for (const auto& [corr, g] : graph_launches_)
    if (config_.all_ranges) ranges_.push_back(trace::Marker{"cuda.graph_launch#" + std::to_string(g.graph_id), g.start_ns,
                                    g.end_ns - g.start_ns, true});
  std::stable_sort(ranges_.begin(), ranges_.end(),
                   [](const trace::Marker& a, const trace::Marker& b) { return a.start_ns < b.start_ns; });
  for (const auto& m : ranges_) writer_.write(m);
  bool sync_cut = false;
  {
    std::lock_guard sync_lock(sync_mu_);
    std::stable_sort(syncs_.begin(), syncs_.end(),
                     [](const trace::SyncRecord& a, const trace::SyncRecord& b) { return a.enter_ns < b.enter_ns; });
    for (const auto& y : syncs_) writer_.write(y);
    stats_.syncs = syncs_.size();
    sync_cut = sync_dropped_;
    writer_.set_syncs_recorded(syncs_all_.load(std::memory_order_relaxed) && !sync_cut);
  }
  std::string notes = note;
  auto join = [&](const std::string& s) { notes += (notes.empty() ? "" : "; ") + s; };
  std::uint64_t dropped = stats_.dropped_cupti + stats_.dropped_ranges;
  if (stats_.dropped_cupti > 0) join(std::to_string(stats_.dropped_cupti) + " activity records dropped by CUPTI");
  if (stats_.dropped_buffers > 0)
    join(std::to_string(stats_.dropped_buffers) + " activity buffer requests refused at the cap");
  if (stats_.dropped_ranges > 0) join(std::to_string(stats_.dropped_ranges) + " NVTX ranges dropped at the cap");
  if (sync_cut) join("synchronizes beyond " + std::to_string(kMaxRanges) + " not written");
  if (unclosed > 0) join(std::to_string(unclosed) + " NVTX ranges still open at the end (not written)");
  bool whole = complete && stats_.dropped_cupti == 0 && stats_.dropped_buffers == 0;
  writer_.close(whole, dropped, notes);
  finished_.store(true, std::memory_order_release);
}

bool Tracer::ok() const {
  std::lock_guard lock(mu_);
  return writer_.ok();
}

std::string Tracer::error() const {
  std::lock_guard lock(mu_);
  return writer_.error();
}

TracerStats Tracer::stats() const {
  std::lock_guard lock(mu_);
  return stats_;
}

}  // namespace gearshift::cupti
