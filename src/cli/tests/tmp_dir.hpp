// A scratch folder for a CLI test's input files, removed with everything in it when the test ends.
#pragma once

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>

namespace gearshift::test {

class TmpDir {
 public:
  // Under the system's temp folder, named `prefix` and the process id (tests of one binary run one at a time).
  explicit TmpDir(const std::string& prefix)
      : dir(std::filesystem::temp_directory_path() / (prefix + std::to_string(::getpid()))) {
    std::filesystem::create_directories(dir);
  }
  ~TmpDir() { std::filesystem::remove_all(dir); }
  TmpDir(const TmpDir&) = delete;
  TmpDir& operator=(const TmpDir&) = delete;
  // Writes `text` to the file `name` in it; returns that file's path.
  std::string write(const std::string& name, const std::string& text) const {
    std::ofstream(dir / name) << text;
    return (dir / name).string();
  }
  const std::filesystem::path dir;
};

}  // namespace gearshift::test
