// Where the CUPTI injection library (libgearshift_inject.so) is, and the environment that makes a CUDA program
// load it: `gearshift trace` and `gearshift run` inject the same library the same way.
#pragma once

#include <stdexcept>
#include <string>

namespace gearshift::launch {

// Why gearshift's own files cannot be found (the faces: exit code 1, cli/main.cpp).
struct LaunchError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// This gearshift executable's path (/proc/self/exe), for the watchdog; throws LaunchError when unknown.
std::string self_exe();

// $GEARSHIFT_INJECT_LIBRARY, else next to the binary (install: ../lib[/gearshift]; build tree: src/cli/gearshift
// beside src/cupti/libgearshift_inject.so). Throws LaunchError saying where it looked when not found.
std::string find_inject_library();

// Sets CUDA_INJECTION64_PATH and NVTX_INJECTION64_PATH to `library` (NVTX ranges reach CUPTI through it).
// Call before any thread starts: setenv is not thread-safe.
void set_injection_env(const std::string& library);

// Names the trace file the library writes (GEARSHIFT_TRACE_OUTPUT, made absolute) and clears the Chrome output
// (gearshift writes that itself from the finished file). A stale regular file at `path` is removed first: the
// library would otherwise claim FILE.<pid>; anything else (`-o /dev/full`, a disk-full drill) is left alone.
// Returns the absolute path. Before any thread starts.
std::string set_trace_output_env(const std::string& path);

}  // namespace gearshift::launch
