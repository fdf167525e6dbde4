#pragma once

#include <cstdint>
#include <stdexcept>
#include <string>

namespace gearshift::trace {

// A bad input file. what() is one line: "<file>: <where>: <what is wrong>".
class TraceError : public std::runtime_error {
 public:
  TraceError(const std::string& file, const std::string& message) : std::runtime_error(file + ": " + message) {}
};

}  // namespace gearshift::trace
