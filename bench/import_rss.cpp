// Imports one trace and reports what was kept and the process's peak RSS, to show that memory follows the
// kept records, not the file size.   build/bench/import_rss FILE
#include <sys/resource.h>

#include <chrono>
#include <cstdio>
#include <exception>

#include "trace/gearshift_format.hpp"

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: import_rss TRACE\n");
    return 2;
  }
  try {
    auto t0 = std::chrono::steady_clock::now();
    auto t = gearshift::trace::import_trace(argv[1]);
    double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    rusage ru{};
    getrusage(RUSAGE_SELF, &ru);
    std::printf("ops %zu kernels %zu markers %zu names %zu import %.2f s peak RSS %.1f MiB\n", t.ops.size(),
                t.kernel_count(), t.markers.size(), t.names.size(), s, static_cast<double>(ru.ru_maxrss) / 1024.0);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "%s\n", e.what());
    return 1;
  }
  return 0;
}
