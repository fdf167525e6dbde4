// `gearshift trace`'s files, one per CUDA process of the job: every process writes its own file under a name
// private to this run (cupti::staging_trace_path: FILE with ".gs-<tag>.pid<pid>" before its extension; a killed
// run leaves those, each a readable trace). Once the job ended they are renamed: FILE to the training process (the
// busiest process of the lowest rank, or of all when none has a rank, when exactly one is busiest), FILE.rank<r> to
// the busiest process of each other rank, FILE.pid<pid> to the rest (docs/trace-format.md).
#pragma once

#include <cstddef>
#include <string>
#include <vector>

namespace gearshift::launch {

// One process's file of this run.
struct ProcessFile {
  std::string staged, path;  // as the process wrote it; its final name
  long pid = -1;
  int rank = -1;
  std::size_t kernels = 0;
  std::string error;  // not readable: kept under its staged name
};

// A tag of 8 letters and digits, private enough to this run: no other run's files match it.
std::string run_tag();

// The files this run's processes wrote (tag `tag`) beside `out`, read for their rank and kernel count, renamed to
// their final names; in pid order.
std::vector<ProcessFile> name_process_files(const std::string& out, const std::string& tag);

}  // namespace gearshift::launch
