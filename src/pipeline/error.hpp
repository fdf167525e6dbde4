// Errors of the pipeline planner: one line naming the file/row/option at fault.
#pragma once

#include <stdexcept>
#include <string>

namespace gearshift::pipeline {

// Bad profile data or bad planner parameters. what() is one line, e.g.
// "prof.csv: row 12: energy is NaN" or "stage 3 backward: no row for 1200 MHz".
class PipelineError : public std::runtime_error {
 public:
  explicit PipelineError(const std::string& message) : std::runtime_error(message) {}
};

}  // namespace gearshift::pipeline
