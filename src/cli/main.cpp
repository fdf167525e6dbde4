#include <cstdio>
#include <exception>

#include <fmt/core.h>

#include "cli/commands.hpp"
#include "gearshift/version.hpp"
#include "gpu/open_gpus.hpp"
#include "launch/inject_library.hpp"
#include "plan/plan_file.hpp"
#include "runtime/session.hpp"
#include "service/error.hpp"

int main(int argc, char** argv) {
  CLI::App app{"gearshift: cut GPU energy of LLM training without losing step time"};
  app.require_subcommand(1);
  app.set_version_flag("--version", std::string("gearshift ") + gearshift::kVersion);
  gearshift::cli::add_plan_command(app);
  gearshift::cli::add_demo_command(app);
  gearshift::cli::add_gpus_command(app);
  gearshift::cli::add_monitor_command(app);
  gearshift::cli::add_pipeline_command(app);
  gearshift::cli::add_pipeline_profile_command(app);
  gearshift::cli::add_trace_command(app);
  gearshift::cli::add_replay_command(app);
  gearshift::cli::add_run_command(app);
  gearshift::cli::add_plan_ranks_command(app);
  gearshift::cli::add_calibrate_command(app);
  gearshift::cli::add_validate_model_command(app);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    int rc = app.exit(e);
    return rc == 0 ? 0 : gearshift::cli::kUsage;
  } catch (const gearshift::cli::Exit& e) {
    if (*e.what()) std::fprintf(stderr, "gearshift: %s\n", e.what());
    return e.code;
  } catch (const gearshift::service::ServiceError& e) {  // the library's jobs: one exit code per kind
    using Kind = gearshift::service::ServiceError::Kind;
    std::fprintf(stderr, "gearshift: %s\n", e.what());
    switch (e.kind()) {
      case Kind::kBadArgument: return gearshift::cli::kUsage;
      case Kind::kBadInput: return gearshift::cli::kBadInput;
      case Kind::kNoIteration: return gearshift::cli::kNoIteration;
      case Kind::kModelRefused: return gearshift::cli::kModelRefused;
      case Kind::kBadProfile: return gearshift::cli::kBadInput;
      case Kind::kBadPlan: return gearshift::cli::kBadInput;
      case Kind::kNoGpu: return gearshift::cli::kNoGpu;
      case Kind::kNoPermission: return gearshift::cli::kNoPermission;
      case Kind::kFailure: return gearshift::cli::kFailure;
    }
    return gearshift::cli::kFailure;
  } catch (const gearshift::runtime::SessionError& e) {  // a live run refused before the job started
    using Kind = gearshift::runtime::SessionError::Kind;
    std::fprintf(stderr, "gearshift: %s\n", e.what());
    switch (e.kind()) {
      case Kind::kBadOutput: return gearshift::cli::kBadInput;
      case Kind::kNoGpu: return gearshift::cli::kNoGpu;
      case Kind::kNoPermission:
      case Kind::kGpuBusy: return gearshift::cli::kNoPermission;
      case Kind::kFailure: return gearshift::cli::kFailure;
    }
    return gearshift::cli::kFailure;
  } catch (const gearshift::gpu::OpenError& e) {  // NVML or the GPUs a command works on
    std::fprintf(stderr, "gearshift: %s\n", e.what());
    return e.kind() == gearshift::gpu::OpenError::Kind::kNoPermission ? gearshift::cli::kNoPermission
                                                                      : gearshift::cli::kNoGpu;
  } catch (const gearshift::launch::LaunchError& e) {  // gearshift's own files (the injection library)
    std::fprintf(stderr, "gearshift: %s\n", e.what());
    return gearshift::cli::kFailure;
  } catch (const gearshift::plan::PlanFileError& e) {  // a bad plan.json is a bad input file wherever it is read
    std::fprintf(stderr, "gearshift: %s\n", e.what());
    return gearshift::cli::kBadInput;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "gearshift: internal error: %s\n", e.what());
    return gearshift::cli::kFailure;
  }
  return gearshift::cli::kOk;
}
