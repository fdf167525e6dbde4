#include "pipeline/profile.hpp"

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <sstream>

#include <fmt/core.h>

#include "pipeline/error.hpp"

namespace gearshift::pipeline {

const char* instruction_name(Instruction i) {
  switch (i) {
    case Instruction::kForward: return "forward";
    case Instruction::kBackward: return "backward";
    case Instruction::kRecompute: return "recompute";
  }
  return "?";
}

int Profile::num_stages() const {
  int n = 0;
  for (const auto& r : rows) n = std::max(n, r.stage + 1);
  return n;
}

bool Profile::has(int stage, Instruction instr) const {
  return std::any_of(rows.begin(), rows.end(),
                     [&](const ProfileRow& r) { return r.stage == stage && r.instruction == instr; });
}

namespace {

std::string trim(std::string s) {
  auto issp = [](unsigned char c) { return c == ' ' || c == '\t' || c == '\r' || c == '\n'; };
  while (!s.empty() && issp(static_cast<unsigned char>(s.back()))) s.pop_back();
  std::size_t i = 0;
  while (i < s.size() && issp(static_cast<unsigned char>(s[i]))) ++i;
  return s.substr(i);
}

std::vector<std::string> split(const std::string& line) {
  std::vector<std::string> out;
  std::string cell;
  std::istringstream in(line);
  while (std::getline(in, cell, ',')) out.push_back(trim(cell));
  if (!line.empty() && line.back() == ',') out.emplace_back();
  return out;
}

[[noreturn]] void fail(const std::string& src, int line, const std::string& what) {
  throw PipelineError(fmt::format("{}: row {}: {}", src, line, what));
}

double parse_number(const std::string& cell, const std::string& col, const std::string& src, int line) {
  if (cell.empty()) fail(src, line, fmt::format("{} is empty", col));
  errno = 0;
  char* end = nullptr;
  double v = std::strtod(cell.c_str(), &end);
  if (end != cell.c_str() + cell.size() || errno == ERANGE) fail(src, line, fmt::format("{} '{}' is not a number", col, cell));
  if (std::isnan(v)) fail(src, line, fmt::format("{} is NaN", col));
  if (std::isinf(v)) fail(src, line, fmt::format("{} is infinite", col));
  if (v < 0) fail(src, line, fmt::format("{} is negative ({})", col, cell));
  return v;
}

int parse_int(const std::string& cell, const std::string& col, const std::string& src, int line) {
  double v = parse_number(cell, col, src, line);
  if (v != std::floor(v) || v > 1e9) fail(src, line, fmt::format("{} '{}' is not a non-negative integer", col, cell));
  return static_cast<int>(v);
}

}  // namespace

Profile parse_profile(const std::string& text, const std::string& source) {
  Profile p;
  p.source = source;
  // A UTF-8 byte-order mark (Excel's "CSV UTF-8", PowerShell) is not part of the header's first name.
  const bool bom = text.size() >= 3 && text.compare(0, 3, "\xEF\xBB\xBF") == 0;
  std::istringstream in(bom ? text.substr(3) : text);
  std::string line;
  int lineno = 0;
  // Column indices for: stage, instruction, clock, time, energy.
  int col[5] = {-1, -1, -1, -1, -1};
  std::size_t ncols = 0;
  bool have_header = false;
  std::set<std::tuple<int, int, int>> seen;
  while (std::getline(in, line)) {
    ++lineno;
    line = trim(line);
    if (line.empty() || line[0] == '#') continue;
    auto cells = split(line);
    if (!have_header) {
      static const char* perseus[5] = {"stage", "instruction", "frequency", "time", "energy"};
      static const char* own[5] = {"stage", "instruction", "sm_clock_mhz", "time_s", "energy_j"};
      for (const char* const* names : {perseus, own}) {
        int found[5] = {-1, -1, -1, -1, -1};
        for (std::size_t c = 0; c < cells.size(); ++c)
          for (int k = 0; k < 5; ++k)
            if (cells[c] == names[k]) found[k] = static_cast<int>(c);
        if (std::all_of(found, found + 5, [](int f) { return f >= 0; })) std::copy(found, found + 5, col);
      }
      if (col[0] < 0)
        fail(source, lineno,
             fmt::format("unknown header '{}': expected 'stage,instruction,frequency,time,energy' (Perseus) or "
                         "'stage,instruction,sm_clock_mhz,time_s,energy_j' (gearshift)",
                         line));
      ncols = cells.size();
      have_header = true;
      continue;
    }
    if (cells.size() != ncols)
      fail(source, lineno,
           fmt::format("{} columns, header has {}{}", cells.size(), ncols,
                       line.find('"') != std::string::npos ? " (quoted cells are not read as one: no commas inside a cell)"
                                                            : ""));
    ProfileRow r;
    r.line = lineno;
    r.stage = parse_int(cells[col[0]], "stage", source, lineno);
    const std::string& ins = cells[col[1]];
    if (ins == "forward") r.instruction = Instruction::kForward;
    else if (ins == "backward") r.instruction = Instruction::kBackward;
    else if (ins == "recompute") r.instruction = Instruction::kRecompute;
    else fail(source, lineno, fmt::format("unknown instruction '{}' (forward, backward, recompute)", ins));
    r.sm_clock_mhz = parse_int(cells[col[2]], "frequency", source, lineno);
    r.time_s = parse_number(cells[col[3]], "time", source, lineno);
    r.energy_j = parse_number(cells[col[4]], "energy", source, lineno);
    if (r.time_s <= 0) fail(source, lineno, "time must be > 0");
    // A stage instruction draws power at a running clock: 0 J or 0 MHz is no measurement (a 0 J row at 855 MHz
    // made the frontier's minimum energy 0.00 J and a straggler saving of 78.68 %; held-out inputs, session 28).
    if (r.energy_j <= 0) fail(source, lineno, "energy must be > 0");
    if (r.sm_clock_mhz <= 0) fail(source, lineno, "frequency must be > 0 MHz");
    if (!seen.emplace(r.stage, static_cast<int>(r.instruction), r.sm_clock_mhz).second)
      fail(source, lineno, fmt::format("duplicate row for stage {} {} {} MHz", r.stage, ins, r.sm_clock_mhz));
    p.rows.push_back(r);
  }
  if (!have_header) throw PipelineError(source + ": empty profile (no header)");
  if (p.rows.empty()) throw PipelineError(source + ": profile has a header but no rows");
  return p;
}

Profile read_profile(const std::string& path) {
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec)) throw PipelineError(path + ": is a directory, not a profile (CSV)");
  std::ifstream f(path, std::ios::binary);
  if (!f) throw PipelineError(path + ": cannot open profile");
  std::stringstream ss;
  ss << f.rdbuf();
  return parse_profile(ss.str(), path);
}

void validate_profile(const Profile& p, int stages) {
  if (stages < 1) throw PipelineError("--stages must be ≥ 1");
  std::map<std::pair<int, int>, std::set<int>> clocks;  // (stage, instr) -> clocks
  std::set<int> all_clocks;
  bool any_recompute = false;
  for (const auto& r : p.rows) {
    if (r.stage >= stages)
      throw PipelineError(fmt::format("{}: row {}: stage {} but the pipeline has {} stages (0..{})", p.source, r.line,
                                      r.stage, stages, stages - 1));
    clocks[{r.stage, static_cast<int>(r.instruction)}].insert(r.sm_clock_mhz);
    all_clocks.insert(r.sm_clock_mhz);
    any_recompute |= r.instruction == Instruction::kRecompute;
  }
  for (int s = 0; s < stages; ++s) {
    for (int i = 0; i < kNumInstructions; ++i) {
      if (i == static_cast<int>(Instruction::kRecompute) && !any_recompute) continue;
      auto it = clocks.find({s, i});
      if (it == clocks.end())
        throw PipelineError(fmt::format("{}: no rows for stage {} {}", p.source, s,
                                        instruction_name(static_cast<Instruction>(i))));
      for (int c : all_clocks)
        if (!it->second.count(c))
          throw PipelineError(fmt::format("{}: missing row: stage {} {} at {} MHz (other groups have it)", p.source,
                                          s, instruction_name(static_cast<Instruction>(i)), c));
    }
  }
}

}  // namespace gearshift::pipeline
