// `gearshift plan-ranks`: sync-aware slack across the data-parallel ranks of one job (service/sync_slack.hpp),
// as JSON. Shared by the CLI and the Python package (gearshift.plan_ranks), so both print the same object.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "service/plan_job.hpp"
#include "plan/plan_file.hpp"
#include "service/sync_slack.hpp"

namespace gearshift::service {

// Each rank's warnings, "rank N: ...": its GPU choice's (`gpus`), then its input's (`inputs`; run_plan_ranks
// gives both, one per rank).
std::vector<std::string> rank_warnings(const std::vector<GpuChoice>& gpus,
                                       const std::vector<service::RankInput>& inputs);

// The report: deadline, straggler, job step time and energy before/after, and per rank its figures (s, J, %);
// with `gpus` and `inputs` (one per rank, from run_plan_ranks) each rank's "gpu_selection" and the "warnings"
// (rank_warnings).
nlohmann::json plan_ranks_report_json(const std::vector<std::string>& traces, const service::SyncSlackResult& r,
                                      const std::vector<GpuChoice>& gpus = {},
                                      const std::vector<service::RankInput>& inputs = {});

// Rank r's plan as plan.json (plan/plan_file.hpp), for `gearshift run --plan`; rank_plan_file_json is its JSON.
plan::PlanFile rank_plan_file(const service::RankInput& in, const service::SyncSlackResult& r, std::size_t rank,
                              const GpuChoice* gpu = nullptr);
nlohmann::json rank_plan_file_json(const service::RankInput& in, const service::SyncSlackResult& r, std::size_t rank,
                                   const GpuChoice* gpu = nullptr);

// The traces to plan: `args` as given, or, for one directory, the per-rank files of the `gearshift trace -o FILE`
// run in it, in rank order (trace/rank_files.hpp; its .pid<pid> files go to `*skipped`). Throws ServiceError:
// kBadInput for a directory that is not one run's ranks or holds one rank only, kBadArgument for a directory
// among other traces.
std::vector<std::string> rank_traces(const std::vector<std::string>& args, std::vector<std::string>* skipped = nullptr);

// Loads every trace (throws ServiceError) and plans them. `gpu`: the --gpu spec; absent:
// each rank's trace's GPU, as `gearshift plan` (choose_gpu). `gpus`: each rank's GPU choice.
service::SyncSlackResult run_plan_ranks(const std::vector<std::string>& traces, const std::optional<std::string>& gpu,
                                    const service::SyncSlackOptions& options, std::vector<service::RankInput>* inputs = nullptr,
                                    std::vector<GpuChoice>* gpus = nullptr);

}  // namespace gearshift::service
