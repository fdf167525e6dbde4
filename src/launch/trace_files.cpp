#include "launch/trace_files.hpp"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <filesystem>
#include <map>
#include <optional>
#include <set>

#include <fmt/core.h>
#include <nlohmann/json.hpp>

#include "cupti/config.hpp"
#include "trace/error.hpp"
#include "trace/gearshift_format.hpp"

namespace gearshift::launch {

namespace fs = std::filesystem;

std::string run_tag() {
  static const char digits[] = "abcdefghijklmnopqrstuvwxyz0123456789";
  std::uint64_t x = static_cast<std::uint64_t>(getpid()) * 0x9e3779b97f4a7c15ull ^
                    static_cast<std::uint64_t>(std::chrono::steady_clock::now().time_since_epoch().count());
  std::string t;
  for (int i = 0; i < 8; ++i, x /= 36) t += digits[x % 36];
  return t;
}

std::vector<ProcessFile> name_process_files(const std::string& out, const std::string& tag) {
  std::vector<ProcessFile> files;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(fs::path(out).parent_path(), ec)) {
    const long pid = cupti::staging_trace_pid(out, tag, e.path().string());
    if (pid <= 0) continue;
    ProcessFile f;
    f.staged = f.path = e.path().string();
    f.pid = pid;
    try {
      const trace::Trace t = trace::read_gearshift_trace(f.staged);
      f.kernels = t.kernel_count();
      const auto meta = nlohmann::json::parse(t.meta_json, nullptr, false);
      if (meta.is_object() && meta.contains("rank") && meta["rank"].is_number_integer()) f.rank = meta["rank"].get<int>();
    } catch (const trace::TraceError& x) {
      f.error = x.what();
    }
    files.push_back(std::move(f));
  }
  std::sort(files.begin(), files.end(), [](const ProcessFile& a, const ProcessFile& b) { return a.pid < b.pid; });
  // The busiest readable process of each rank (-1: no rank), when exactly one is busiest.
  std::map<int, std::optional<std::size_t>> main_of;
  for (std::size_t i = 0; i < files.size(); ++i) {
    if (!files[i].error.empty()) continue;
    auto& m = main_of[files[i].rank];
    if (!m || files[i].kernels > files[*m].kernels) m = i;
  }
  for (auto& [rank, m] : main_of)
    for (std::size_t i = 0; m && i < files.size(); ++i)
      if (i != *m && files[i].error.empty() && files[i].rank == rank && files[i].kernels == files[*m].kernels)
        m.reset();  // a tie: neither is the rank's training process
  // FILE: the main process of the lowest rank (ranked processes first).
  std::optional<std::size_t> primary;
  if (!main_of.empty()) {
    auto it = main_of.upper_bound(-1);
    primary = it != main_of.end() ? it->second : main_of.begin()->second;
  }
  std::set<std::string> taken;
  for (std::size_t i = 0; i < files.size(); ++i) {
    ProcessFile& f = files[i];
    if (!f.error.empty()) continue;
    if (primary && i == *primary) f.path = out;
    else if (f.rank >= 0 && main_of[f.rank] == i) f.path = cupti::insert_before_extension(out, fmt::format("rank{}", f.rank));
    else f.path = cupti::insert_before_extension(out, fmt::format("pid{}", f.pid));
    if (!taken.insert(f.path).second) f.path = cupti::insert_before_extension(out, fmt::format("pid{}", f.pid));
    std::error_code rc;
    fs::rename(f.staged, f.path, rc);
    if (rc) {
      f.error = "not renamed: " + rc.message();
      f.path = f.staged;
    }
  }
  return files;
}

}  // namespace gearshift::launch
