#include "trace/rank_files.hpp"

#include <algorithm>
#include <charconv>
#include <map>
#include <optional>
#include <string_view>

#include <fmt/format.h>

namespace gearshift::trace {
namespace {

constexpr std::string_view kExtensions[] = {".jsonl.gz", ".json.gz", ".jsonl", ".json", ".gz"};  // as cupti::insert_before_extension

// "<stem>.<tag><digits>" -> (stem, number); nullopt when `base` does not end so.
std::optional<std::pair<std::string, long>> tagged(std::string_view base, std::string_view tag) {
  const std::size_t dot = base.rfind('.');
  if (dot == std::string_view::npos) return std::nullopt;
  const std::string_view last = base.substr(dot + 1);
  if (!last.starts_with(tag) || last.size() == tag.size()) return std::nullopt;
  long v = -1;
  const std::string_view digits = last.substr(tag.size());
  auto [p, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), v);
  if (ec != std::errc() || p != digits.data() + digits.size() || v < 0) return std::nullopt;
  return std::make_pair(std::string(base.substr(0, dot)), v);
}

}  // namespace

RankFiles rank_trace_files(const std::filesystem::path& dir) {
  std::error_code ec;
  if (!std::filesystem::is_directory(dir, ec))
    throw std::invalid_argument(fmt::format("{}: not a directory", dir.string()));
  struct Named {
    std::string stem, ext, path;
  };
  std::vector<Named> plain;              // FILE
  std::map<long, std::vector<Named>> by_rank;  // FILE.rank<r>
  RankFiles out;
  std::vector<std::string> paths;
  for (const auto& e : std::filesystem::directory_iterator(dir, ec))
    if (e.is_regular_file(ec)) paths.push_back(e.path().string());
  std::sort(paths.begin(), paths.end());
  for (const std::string& path : paths) {
    const std::string name = std::filesystem::path(path).filename().string();
    std::string_view ext;
    for (std::string_view x : kExtensions)
      if (name.size() > x.size() && name.ends_with(x)) {
        ext = x;
        break;
      }
    if (ext.empty()) continue;
    const std::string_view base = std::string_view(name).substr(0, name.size() - ext.size());
    if (tagged(base, "pid")) {
      out.skipped.push_back(path);
    } else if (auto r = tagged(base, "rank")) {
      by_rank[r->second].push_back({r->first, std::string(ext), path});
    } else {
      plain.push_back({std::string(base), std::string(ext), path});
    }
  }
  if (plain.size() > 1)
    throw std::invalid_argument(fmt::format("{}: {} trace files without a .rank<r> tag ({}, {}, ...): one job's "
                                            "files per directory (gearshift trace -o FILE names the lowest rank's "
                                            "FILE, the others FILE.rank<r>)",
                                            dir.string(), plain.size(), plain[0].path, plain[1].path));
  if (plain.empty() && by_rank.empty())
    throw std::invalid_argument(fmt::format("{}: no trace file of a rank (.json, .json.gz, .jsonl, .jsonl.gz, .gz){}",
                                            dir.string(), out.skipped.empty() ? "" : "; only .pid<pid> files"));
  for (const auto& [rank, files] : by_rank) {
    if (files.size() > 1)
      throw std::invalid_argument(fmt::format("{}: two files of rank {}: {} and {}", dir.string(), rank,
                                              files[0].path, files[1].path));
    if (!plain.empty() && (files[0].stem != plain[0].stem || files[0].ext != plain[0].ext))
      throw std::invalid_argument(fmt::format("{}: {} is not a rank file of {} (one job's files per directory)",
                                              dir.string(), files[0].path, plain[0].path));
  }
  // FILE is the lowest rank: 0 when the others are 1 .. N-1.
  const long first = plain.empty() ? 0 : 1;
  long expect = first;
  for (const auto& [rank, files] : by_rank) {
    if (rank != expect)
      throw std::invalid_argument(fmt::format("{}: rank {} has no trace file (found ranks {}..{}{})", dir.string(),
                                              expect, by_rank.begin()->first, by_rank.rbegin()->first,
                                              plain.empty() ? "" : " and the lowest rank's FILE"));
    ++expect;
  }
  if (!plain.empty()) out.ranks.push_back(plain[0].path);
  for (const auto& [rank, files] : by_rank) out.ranks.push_back(files[0].path);
  return out;
}

}  // namespace gearshift::trace
