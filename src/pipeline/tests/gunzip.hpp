// The whole text of a gzipped (or plain) file, for the tests that read the shared Perseus files ("" when it cannot
// be opened: the test's parse then says so).
#pragma once

#include <zlib.h>

#include <string>

namespace gearshift::pipeline::test {

inline std::string gunzip(const std::string& path) {
  gzFile g = gzopen(path.c_str(), "rb");
  std::string out;
  char buf[1 << 14];
  int n;
  while (g && (n = gzread(g, buf, sizeof buf)) > 0) out.append(buf, static_cast<std::size_t>(n));
  if (g) gzclose(g);
  return out;
}

}  // namespace gearshift::pipeline::test
