#include "model/sweep_csv.hpp"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <map>
#include <optional>
#include <sstream>
#include <stdexcept>
#include <tuple>

#include "model/csv_fields.hpp"

namespace gearshift::model {
namespace {


std::string trim(const std::string& s) {
  const auto b = s.find_first_not_of(" \t\r");
  if (b == std::string::npos) return "";
  return s.substr(b, s.find_last_not_of(" \t\r") - b + 1);
}

double positive(const std::string& field, const std::string& origin, int line_no, const std::string& column) {
  const double v = csv_number(field, origin, line_no, column);
  if (!(v > 0))
    throw std::invalid_argument(csv_where(origin, line_no) + ": column '" + column + "' must be > 0, got '" + field + "'");
  return v;
}

// A clock in MHz; a read-back (applied) clock may be fractional and is rounded to whole MHz.
int clock_mhz(const std::string& field, const std::string& origin, int line_no, const std::string& column) {
  const double v = positive(field, origin, line_no, column);
  if (v > 1e6) throw std::invalid_argument(csv_where(origin, line_no) + ": column '" + column + "' is not a clock in MHz: '" + field + "'");
  return static_cast<int>(std::lround(v));
}

const char* kCounters[7] = {"sm_active", "sm_occupancy", "tensor_active", "dram_active",
                            "fp64_active", "fp32_active", "fp16_active"};

}  // namespace

SweepFile parse_sweep_csv(const std::string& text, const std::string& origin, int default_mem_mhz) {
  SweepFile out;
  std::istringstream in(text);
  std::string line;
  int line_no = 0, header_line = 0;
  std::vector<std::string> names;
  std::vector<std::pair<int, std::vector<std::string>>> rows;
  while (std::getline(in, line)) {
    ++line_no;
    const std::string t = trim(line);
    if (t.empty()) continue;
    if (t[0] == '#') {  // a comment, or a header field `# key: value`
      const auto colon = t.find(':');
      if (colon == std::string::npos) continue;
      std::string key = trim(t.substr(1, colon - 1));
      const std::string value = trim(t.substr(colon + 1));
      std::transform(key.begin(), key.end(), key.begin(), [](unsigned char c) { return std::tolower(c); });
      if (key == "board") {
        if (value.empty()) throw std::invalid_argument(csv_where(origin, line_no) + ": '# board:' names no board");
        out.board = value;
      } else if (key == "power_limit_w") {
        out.power_limit_w = positive(value, origin, line_no, "power_limit_w");
      }
      continue;
    }
    auto f = split_csv(line);
    for (auto& x : f) x = trim(x);
    if (names.empty()) {
      names = std::move(f);
      header_line = line_no;
      continue;
    }
    if (f.size() != names.size())
      throw std::invalid_argument(csv_where(origin, line_no) + ": expected " + std::to_string(names.size()) +
                                  " fields as in the header (line " + std::to_string(header_line) + "), got " +
                                  std::to_string(f.size()));
    rows.emplace_back(line_no, std::move(f));
  }
  if (names.empty()) throw std::invalid_argument(origin + ": empty file (no header line; docs/sweep-format.md)");

  auto col = [&](const std::string& n) -> std::optional<std::size_t> {
    auto it = std::find(names.begin(), names.end(), n);
    if (it == names.end()) return std::nullopt;
    return static_cast<std::size_t>(it - names.begin());
  };
  auto missing = [&](const std::string& what) {
    return std::invalid_argument(csv_where(origin, header_line) + ": missing column " + what +
                                 " (required: kernel, sm_clock_mhz or applied_sm_clock_mhz, time_s|time_ms|time_us, "
                                 "energy_j|power_w; docs/sweep-format.md)");
  };
  const auto kernel = col("kernel");
  if (!kernel) throw missing("'kernel'");
  const auto sm = col("sm_clock_mhz"), sm_applied = col("applied_sm_clock_mhz");
  if (!sm && !sm_applied) throw missing("'sm_clock_mhz'");
  const auto mem = col("mem_clock_mhz"), mem_applied = col("applied_mem_clock_mhz");
  std::optional<std::size_t> time;
  std::string time_name;
  double time_scale = 1;
  for (auto [n, scale] : {std::pair<const char*, double>{"time_s", 1.0}, {"time_ms", 1e-3}, {"time_us", 1e-6}}) {
    if (!col(n)) continue;
    if (time)
      throw std::invalid_argument(csv_where(origin, header_line) + ": two time columns ('" + time_name + "' and '" + n +
                                  "'); give one");
    time = col(n), time_name = n, time_scale = scale;
  }
  if (!time) throw missing("'time_s', 'time_ms' or 'time_us'");
  const auto energy = col("energy_j"), power = col("power_w");
  if (!energy && !power) throw missing("'energy_j' or 'power_w'");
  const auto board = col("board");

  // Counter columns: a column with no value on any row is ignored (said once); otherwise every row gives all of
  // the present columns, or none (that row's counters not measured).
  std::vector<std::pair<int, std::size_t>> counters;  // (index in kCounters, column)
  std::vector<std::string> empty_counters;
  for (int i = 0; i < 7; ++i) {
    const auto c = col(kCounters[i]);
    if (!c) continue;
    const bool all_empty = std::all_of(rows.begin(), rows.end(), [&](const auto& r) { return r.second[*c].empty(); });
    if (all_empty)
      empty_counters.push_back(kCounters[i]);
    else
      counters.emplace_back(i, *c);
  }
  if (!empty_counters.empty()) {
    std::string list;
    for (const auto& n : empty_counters) list += (list.empty() ? "" : ", ") + n;
    out.notes.push_back(origin + ": counter column(s) " + list + " empty on every row: ignored");
  }

  std::map<std::string, std::size_t> index;
  std::map<std::tuple<std::string, int, int>, int> seen;  // (kernel, mem, sm) → line
  std::string board_line_value;
  for (const auto& [ln, row] : rows) {
    const std::string& name = row[*kernel];
    if (name.empty()) throw std::invalid_argument(csv_where(origin, ln) + ": column 'kernel' is empty");
    if (board) {
      const std::string& b = row[*board];
      if (b.empty()) throw std::invalid_argument(csv_where(origin, ln) + ": column 'board' is empty");
      if (!out.board.empty() && b != out.board)
        throw std::invalid_argument(csv_where(origin, ln) + ": board '" + b + "' differs from '" + out.board +
                                    "' named before; one board per file");
      out.board = b;
    }
    Sample s;
    const bool use_applied_sm = sm_applied && !row[*sm_applied].empty();
    if (!use_applied_sm && (!sm || row[*sm].empty()))
      throw std::invalid_argument(csv_where(origin, ln) + ": no SM clock (sm_clock_mhz and applied_sm_clock_mhz empty)");
    s.sm_mhz = use_applied_sm ? clock_mhz(row[*sm_applied], origin, ln, "applied_sm_clock_mhz")
                              : clock_mhz(row[*sm], origin, ln, "sm_clock_mhz");
    s.mem_mhz = default_mem_mhz;
    if (mem_applied && !row[*mem_applied].empty())
      s.mem_mhz = clock_mhz(row[*mem_applied], origin, ln, "applied_mem_clock_mhz");
    else if (mem)
      s.mem_mhz = clock_mhz(row[*mem], origin, ln, "mem_clock_mhz");
    s.time_s = positive(row[*time], origin, ln, time_name) * time_scale;
    if (energy && !row[*energy].empty())
      s.energy_j = positive(row[*energy], origin, ln, "energy_j");
    else if (power && !row[*power].empty())
      s.energy_j = positive(row[*power], origin, ln, "power_w") * s.time_s;
    else
      throw std::invalid_argument(csv_where(origin, ln) + ": no energy_j or power_w value");
    const auto key = std::make_tuple(name, s.mem_mhz, s.sm_mhz);
    if (auto [it, added] = seen.try_emplace(key, ln); !added)
      throw std::invalid_argument(csv_where(origin, ln) + ": kernel '" + name + "' already has a sample at SM " +
                                  std::to_string(s.sm_mhz) + " MHz, memory " + std::to_string(s.mem_mhz) +
                                  " MHz (line " + std::to_string(it->second) + ")");
    ActivityCounters a;
    if (!counters.empty()) {
      double v[7] = {0, 0, 0, 0, 0, 0, 0};
      a.measured = std::all_of(counters.begin(), counters.end(), [&](auto c) { return !row[c.second].empty(); });
      for (const auto& [i, c] : counters) {
        if (row[c].empty()) continue;
        v[i] = csv_number(row[c], origin, ln, kCounters[i]);
        if (v[i] < 0 || v[i] > 1.0 + 1e-9)
          throw std::invalid_argument(csv_where(origin, ln) + ": column '" + kCounters[i] +
                                      "' is an activity ratio in [0, 1], got '" + row[c] + "'");
      }
      if (!a.measured) std::fill(std::begin(v), std::end(v), 0.0);
      a.sm_active = v[0], a.sm_occupancy = v[1], a.tensor_active = v[2], a.dram_active = v[3];
      a.fp64_active = v[4], a.fp32_active = v[5], a.fp16_active = v[6];
    }
    auto [it, added] = index.try_emplace(name, out.kernels.size());
    if (added) {
      KernelSweep k;
      k.dataset = "csv", k.suite = "real", k.kernel = name, k.source = origin;
      out.kernels.push_back(std::move(k));
      out.first_line.push_back(ln);
    }
    out.kernels[it->second].samples.push_back(s);
    if (!counters.empty()) out.kernels[it->second].counters.push_back(a);
  }
  if (out.kernels.empty())
    throw std::invalid_argument(origin + ": no data rows after the header (line " + std::to_string(header_line) + ")");
  for (auto& k : out.kernels) {
    k.gpu = out.board;
    // Ascending (memory, SM) clock, counters kept beside their samples.
    std::vector<std::size_t> idx(k.samples.size());
    for (std::size_t i = 0; i < idx.size(); ++i) idx[i] = i;
    std::sort(idx.begin(), idx.end(), [&](std::size_t a, std::size_t b) {
      return std::pair(k.samples[a].mem_mhz, k.samples[a].sm_mhz) < std::pair(k.samples[b].mem_mhz, k.samples[b].sm_mhz);
    });
    std::vector<Sample> s;
    std::vector<ActivityCounters> c;
    for (std::size_t i : idx) {
      s.push_back(k.samples[i]);
      if (!k.counters.empty()) c.push_back(k.counters[i]);
    }
    k.samples = std::move(s), k.counters = std::move(c);
  }
  return out;
}

}  // namespace gearshift::model
