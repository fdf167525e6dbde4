// The library's jobs (planning a trace, ranks, a pipeline or online; running a job live; calibrating) fail with one error type whose kind says what was
// wrong; each face maps the kinds once: cli/main.cpp to exit codes, python/src/core.cpp to exception classes.
#pragma once

#include <stdexcept>
#include <string>

namespace gearshift::service {

class ServiceError : public std::runtime_error {
 public:
  enum class Kind {
    kBadArgument,   // a parameter the caller gave: an unknown GPU spec or strategy, a slowdown out of [0, 1]
    kBadInput,      // an input file: unreadable or invalid trace, or a trace that did not run on the chosen GPU
    kNoIteration,   // the trace holds no repeating step to plan for (docs/step-detection.md)
    kModelRefused,  // the model cannot reproduce the trace's measurement: no plan (right or refused)
    kBadProfile,    // a pipeline stage profile: unreadable or invalid, or a pipeline it cannot plan
    kBadPlan,       // a plan file (plan.json): unreadable or invalid (plan/plan_file.hpp)
    kNoGpu,         // NVML missing or failing, no GPU of that index, or a GPU without what the job needs
    kNoPermission,  // NVML refuses this user, or refuses to lock the clocks
    kFailure,       // anything else that stopped the job (a file that cannot be written, a measurement that failed)
  };
  ServiceError(Kind kind, const std::string& message) : std::runtime_error(message), kind_(kind) {}
  Kind kind() const noexcept { return kind_; }

 private:
  Kind kind_;
};

}  // namespace gearshift::service
