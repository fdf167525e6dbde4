// Where the CUPTI injection library (libgearshift_inject.so) is, and the environment that makes a CUDA program
// load it: `gearshift trace` and `gearshift run` inject the same library the same way.
#pragma once

#include <string>

namespace gearshift::cli {

// $GEARSHIFT_INJECT_LIBRARY, else next to the binary (install: ../lib[/gearshift]; build tree: src/cli/gearshift
// beside src/cupti/libgearshift_inject.so). Throws Exit(kFailure) saying where it looked when not found.
std::string find_inject_library();

// Sets CUDA_INJECTION64_PATH and NVTX_INJECTION64_PATH to `library` (NVTX ranges reach CUPTI through it).
// Call before any thread starts: setenv is not thread-safe.
void set_injection_env(const std::string& library);

}  // namespace gearshift::cli
