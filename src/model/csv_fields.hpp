// One line of the simple CSV files the model reads (Perseus stage profiles, public kernel sweeps): fields split
// at every comma, carriage returns dropped. No quoting: none of those files quotes a field.
#pragma once

#include <string>
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

}  // namespace gearshift::model
