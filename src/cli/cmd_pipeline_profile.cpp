// `gearshift pipeline-profile DIR -o PROFILE.csv`: a stage profile for `gearshift pipeline` from the measured runs of
// several clock plans (Perseus layout: N.sched.json(.gz) + N.prof.json(.gz)); --leave-out N keeps plan N out (to
// predict it). service/measured_pipeline_profile.hpp.
#include <fstream>
#include <memory>

#include <fmt/core.h>

#include "cli/commands.hpp"
#include "service/measured_pipeline_profile.hpp"

namespace gearshift::cli {

namespace {

struct Options {
  service::MeasuredProfileOptions job;
  std::string output;
  bool json = false;
};

void run(const Options& o) {
  const auto r = service::build_measured_pipeline_profile(o.job);  // ServiceError: exit codes in main.cpp
  std::ofstream f(o.output, std::ios::binary);
  f << pipeline::measured_profile_csv(r.profile, r.dir);
  if (!f) throw Exit(kBadInput, "-o: cannot write " + o.output);
  if (o.json) {
    auto j = service::measured_profile_json(r);
    j["output"] = o.output;
    fmt::print("{}\n", j.dump(2));
  } else {
    fmt::print("{}wrote {} (pass --blocking-power-w {:.3f} to gearshift pipeline with it)\n",
               service::measured_profile_text(r), o.output, r.profile.blocking_power_w);
  }
}

}  // namespace

void add_pipeline_profile_command(CLI::App& app) {
  auto o = std::make_shared<Options>();
  auto* cmd = app.add_subcommand("pipeline-profile",
                                 "Stage profile for 'pipeline' from measured plans: times measured, power fitted from "
                                 "per-rank energies (modelled)");
  cmd->add_option("dir", o->job.dir, "Folder of measured plans: N.sched.json(.gz) + N.prof.json(.gz) (Perseus)")
      ->required();
  cmd->add_option("-o,--output", o->output, "Profile CSV to write (gearshift format)")->required();
  cmd->add_option("--leave-out", o->job.leave_out, "Plan number not to use (repeatable)");
  cmd->add_option("--clock-step-mhz", o->job.clock_step_mhz,
                  "Also give rows on this clock grid (e.g. 15, the A100's) from the highest measured clock down to the "
                  "lowest, interpolated; default 0: measured clocks only")
      ->check(CLI::Range(0, 1000));
  cmd->add_flag("--json", o->json, "Print the fit as JSON");
  cmd->callback([o] { run(*o); });
}

}  // namespace gearshift::cli
