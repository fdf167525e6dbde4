// The simple CSV files the model reads (Perseus stage profiles, public kernel sweeps, the open sweep format): one
// line's fields split at every comma, carriage returns dropped (no quoting: none of those files quotes a field), and
// a field read as a number with a message naming file, line and column.
#pragma once

#include <charconv>
#include <cmath>
#include <stdexcept>
#include <string>
#include <system_error>
#include <vector>

namespace gearshift::model {

inline std::vector<std::string> split_csv(const std::string& line) {
  std::vector<std::string> out(1);
  for (char c : line) {
    if (c == ',')
      out.emplace_back();
    else if (c != '\r')
      out.back() += c;
  }
  return out;
}

// "file:line", for messages.
inline std::string csv_where(const std::string& origin, int line_no) { return origin + ":" + std::to_string(line_no); }

// A finite number; integers written as floats ("412.00000000") are accepted (synergy README caveat). Throws
// std::invalid_argument naming the file, line and column otherwise.
inline double csv_number(const std::string& field, const std::string& origin, int line_no, const std::string& column) {
  double v = 0;
  const char* end = field.data() + field.size();
  auto [ptr, ec] = std::from_chars(field.data(), end, v);
  if (field.empty() || ec != std::errc() || ptr != end || !std::isfinite(v))
    throw std::invalid_argument(csv_where(origin, line_no) + ": column '" + column + "' is not a number: '" + field + "'");
  return v;
}

}  // namespace gearshift::model
