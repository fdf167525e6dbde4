// Runs the real `gearshift` binary (GEARSHIFT_BINARY) as a user would: its exit code and its output
// (stdout and stderr together).
#pragma once

#include <sys/wait.h>

#include <array>
#include <cstdio>
#include <string>

namespace gearshift::test {

struct Result {
  int code = -1;  // exit code; -1 when killed by a signal
  std::string out;
};

inline Result run(const std::string& args) {
  const std::string cmd = std::string(GEARSHIFT_BINARY) + " " + args + " 2>&1";
  FILE* p = popen(cmd.c_str(), "r");
  Result r;
  if (p == nullptr) return r;
  std::array<char, 4096> buf;
  std::size_t n;
  while ((n = fread(buf.data(), 1, buf.size(), p)) > 0) r.out.append(buf.data(), n);
  const int status = pclose(p);
  r.code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return r;
}

}  // namespace gearshift::test
