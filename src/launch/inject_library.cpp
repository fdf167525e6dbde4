#include "launch/inject_library.hpp"

#include <unistd.h>

#include <cstdlib>
#include <filesystem>

#include <fmt/core.h>

#include "cupti/config.hpp"

namespace gearshift::launch {

namespace fs = std::filesystem;

std::string find_inject_library() {
  if (const char* e = std::getenv("GEARSHIFT_INJECT_LIBRARY"); e != nullptr && *e != '\0') {
    if (!fs::exists(e)) throw LaunchError(fmt::format("GEARSHIFT_INJECT_LIBRARY={} does not exist", e));
    return fs::absolute(e).string();
  }
  std::error_code ec;
  fs::path exe = fs::read_symlink("/proc/self/exe", ec);
  if (ec) throw LaunchError("cannot locate the gearshift binary (/proc/self/exe); set GEARSHIFT_INJECT_LIBRARY");
  fs::path dir = exe.parent_path();
  for (const fs::path& c : {dir / "libgearshift_inject.so", dir / ".." / "cupti" / "libgearshift_inject.so",
                            dir / ".." / "lib" / "gearshift" / "libgearshift_inject.so",
                            dir / ".." / "lib" / "libgearshift_inject.so"})
    if (fs::exists(c)) return fs::weakly_canonical(c).string();
  throw LaunchError(fmt::format("libgearshift_inject.so not found next to {} (was gearshift built with CUPTI "
                               "headers?); set GEARSHIFT_INJECT_LIBRARY to its path", exe.string()));
}

std::string set_trace_output_env(const std::string& path) {
  const std::string out = fs::absolute(path).string();
  std::error_code ec;
  if (fs::is_regular_file(out, ec)) fs::remove(out, ec);
  setenv(cupti::kEnvOutput, out.c_str(), 1);
  return out;
}

std::string self_exe() {
  char path[4096];
  ssize_t n = readlink("/proc/self/exe", path, sizeof path - 1);
  if (n <= 0) throw LaunchError("cannot find the gearshift executable (/proc/self/exe)");
  return std::string(path, static_cast<std::size_t>(n));
}

void set_injection_env(const std::string& library) {
  setenv("CUDA_INJECTION64_PATH", library.c_str(), 1);
  setenv("NVTX_INJECTION64_PATH", library.c_str(), 1);  // forwarded to CUPTI inside the library
}

}  // namespace gearshift::launch
