// The per-rank trace files that `gearshift trace -o FILE` writes under a multi-process launcher (torchrun, srun):
// FILE for the busiest process of the lowest rank, FILE.rank<r> (before the extension: trace.rank1.json.gz) for
// the busiest process of each other rank, FILE.pid<pid> for every other CUDA process (compile workers, data
// loaders), docs/trace-format.md. `gearshift plan-ranks DIR` plans the ranks of such a directory together.
#pragma once

#include <filesystem>
#include <stdexcept>
#include <string>
#include <vector>

namespace gearshift::trace {

struct RankFiles {
  std::vector<std::string> ranks;    // one file per rank, rank 0 first
  std::vector<std::string> skipped;  // the .pid<pid> files: processes that are no rank's training process
};

// The trace files in `dir` (names ending .json, .json.gz, .jsonl, .jsonl.gz or .gz; other files are ignored), in rank
// order. Throws std::invalid_argument when `dir` is not a directory, holds no trace of a rank, more than one
// file without a .rank<r>/.pid<pid> tag or of one rank, files of more than one FILE, or ranks that are not
// 0 .. N-1 with FILE as the lowest.
RankFiles rank_trace_files(const std::filesystem::path& dir);

}  // namespace gearshift::trace
