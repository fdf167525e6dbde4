#include <cstdio>
#include <exception>

#include <fmt/core.h>

#include "cli/commands.hpp"
#include "plan/plan_file.hpp"

int main(int argc, char** argv) {
  CLI::App app{"gearshift: cut GPU energy of LLM training without losing step time"};
  app.require_subcommand(1);
  app.set_version_flag("--version", "gearshift 0.1.0");
  gearshift::cli::add_plan_command(app);
  gearshift::cli::add_demo_command(app);
  gearshift::cli::add_gpus_command(app);
  gearshift::cli::add_monitor_command(app);
  gearshift::cli::add_pipeline_command(app);
  gearshift::cli::add_trace_command(app);
  gearshift::cli::add_replay_command(app);
  gearshift::cli::add_run_command(app);
  gearshift::cli::add_plan_ranks_command(app);
  gearshift::cli::add_calibrate_command(app);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    int rc = app.exit(e);
    return rc == 0 ? 0 : gearshift::cli::kUsage;
  } catch (const gearshift::cli::Exit& e) {
    if (*e.what()) std::fprintf(stderr, "gearshift: %s\n", e.what());
    return e.code;
  } catch (const gearshift::plan::PlanFileError& e) {  // a bad plan.json is a bad input file wherever it is read
    std::fprintf(stderr, "gearshift: %s\n", e.what());
    return gearshift::cli::kBadInput;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "gearshift: internal error: %s\n", e.what());
    return gearshift::cli::kFailure;
  }
  return gearshift::cli::kOk;
}
