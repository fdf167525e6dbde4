// `gearshift validate-model SWEEP...`: checks the per-kernel DVFS model against the user's own measured sweeps
// (model/model_check.hpp; format in docs/sweep-format.md) and prints per-kernel and pooled errors, the naive
// baselines and the clock the model would pick against the best measured one. Text (markdown tables) or --json.
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include <fmt/core.h>
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <nlohmann/json.hpp>

#include "cli/commands.hpp"
#include "model/model_check.hpp"

namespace gearshift::cli {
namespace {

namespace gm = model;

std::string te(const gm::ErrorStats& e) { return fmt::format("{:.2f} / {:.2f}", e.time_mape_pct, e.energy_mape_pct); }
std::string pct(double fraction) { return fmt::format("{:.1f} %", 100 * fraction); }
std::string kept(double k) { return k < 0 ? "-" : pct(k); }

const char* kMethod =
    "MEASURED: the files' times and energies. MODELLED: fit_kernel from 3 SM clocks of each kernel (interpolation: the "
    "lowest, middle and highest clock; extrapolation: the top clock and the next two at least 100 MHz below it), "
    "with the board's V-curve, idle line and time shape learnt on the other half of the kernels of the same board "
    "(two folds by order, as bench/kernel_validation). Baselines (not physics): time A/f + B, energy the quadratic "
    "in f, through the same 3 clocks.";

void print_text(const gm::CheckInput& in, const gm::ModelCheck& c) {
  fmt::print("gearshift validate-model: {} kernel sweep(s) from {} file(s)\n", c.kernels.size(), in.files.size());
  for (std::size_t i = 0; i < in.files.size(); ++i) fmt::print("  {}: {}\n", in.files[i], in.formats[i]);
  for (const auto& [gpu, src] : in.board_source) fmt::print("board {}: {}\n", gpu, src);
  fmt::print("\n{}\n", kMethod);

  fmt::print("\n## Per kernel: MODELLED against MEASURED, MAPE % over the held-out clocks (time / energy)\n\n"
             "| file | kernel | memory MHz | clocks | interp. calibration MHz | interp. model | interp. baselines | "
             "extrap. calibration MHz | extrap. model | extrap. baselines |\n|---|---|---|---|---|---|---|---|---|---|\n");
  for (const auto& k : c.kernels)
    fmt::print("| {} | {} | {} | {} | {} | {} | {} | {} | {} | {} |\n", k.source, k.kernel, k.mem_mhz, k.clocks,
               fmt::join(k.interp_calib_mhz, ", "), te(gm::model_errors(k.interp)), te(gm::baseline_errors(k.interp)),
               fmt::join(k.extrap_calib_mhz, ", "), te(gm::model_errors(k.extrap)), te(gm::baseline_errors(k.extrap)));

  std::vector<const gm::PooledCheck*> sets;
  for (const auto& p : c.per_file) sets.push_back(&p);
  if (c.per_file.size() > 1) sets.push_back(&c.all);
  fmt::print("\n## Pooled: MODELLED against MEASURED, MAPE % over the held-out clocks of all kernels (time / energy)\n\n"
             "| set | kernels | held-out points interp. / extrap. | interp. model | interp. baselines | extrap. model | "
             "extrap. baselines |\n|---|---|---|---|---|---|---|\n");
  for (const auto* p : sets)
    fmt::print("| {} | {} | {} / {} | {} | {} | {} | {} |\n", p->label, p->kernels, p->interp_model.n,
               p->extrap_model.n, te(p->interp_model), te(p->interp_baseline), te(p->extrap_model),
               te(p->extrap_baseline));

  fmt::print("\n## Clock choice: the model's pick against the best MEASURED clock within a slowdown bound\n\n"
             "Reference: each kernel's top SM clock. Model: the clock of least MODELLED energy whose MODELLED time is "
             "within the bound of the MODELLED top-clock time (the interpolation fit). Oracle: the clock of least "
             "MEASURED energy whose MEASURED time is within the bound. Savings and slowdowns are MEASURED at the clocks "
             "picked. *kept* = the model's summed saving over the oracle's; *over the bound* = kernels whose MEASURED "
             "time at the model's clock breaks the bound.\n\n"
             "| set | bound | kernels | oracle saving, mean (MEASURED) | model's pick saving, mean (MEASURED) | kept | "
             "over the bound |\n|---|---|---|---|---|---|---|\n");
  for (const auto* p : sets)
    for (const auto& s : p->choice)
      fmt::print("| {} | {:.0f} % | {} | {} | {} | {} | {} of {} |\n", p->label, 100 * s.max_slowdown, s.kernels,
                 pct(s.oracle_saving_mean), pct(s.model_saving_mean), kept(s.kept), s.over_bound, s.kernels);

  fmt::print("\n## Clock choice per kernel: model / oracle SM clock MHz, MEASURED saving model / oracle, MEASURED "
             "slowdown at the model's clock\n\n"
             "| file | kernel | memory MHz | top MHz | bound 0 % | bound 1 % | bound 2 % | bound 5 % |\n"
             "|---|---|---|---|---|---|---|---|\n");
  for (const auto& k : c.kernels) {
    std::vector<std::string> cells;
    for (const auto& ch : k.choice)
      cells.push_back(fmt::format("{} / {}: {:.1f} / {:.1f} %, {:+.1f} %{}", ch.model_mhz, ch.oracle_mhz,
                                  100 * ch.model_saving, 100 * ch.oracle_saving, 100 * ch.model_slowdown,
                                  ch.over_bound ? " **over**" : ""));
    fmt::print("| {} | {} | {} | {} | {} |\n", k.source, k.kernel, k.mem_mhz, k.choice[0].top_mhz,
               fmt::join(cells, " | "));
  }
}

nlohmann::json errors_json(const gm::ErrorStats& e) {
  return {{"points", e.n}, {"time_mape_pct", e.time_mape_pct}, {"time_max_pct", e.time_max_pct},
          {"energy_mape_pct", e.energy_mape_pct}, {"energy_max_pct", e.energy_max_pct}};
}

nlohmann::json pooled_json(const gm::PooledCheck& p) {
  nlohmann::json choice = nlohmann::json::array();
  for (const auto& s : p.choice)
    choice.push_back({{"max_slowdown_pct", 100 * s.max_slowdown}, {"kernels", s.kernels},
                      {"oracle_saving_mean_pct", 100 * s.oracle_saving_mean},
                      {"model_saving_mean_pct", 100 * s.model_saving_mean},
                      {"kept_pct", s.kept < 0 ? nlohmann::json(nullptr) : nlohmann::json(100 * s.kept)},
                      {"over_bound", s.over_bound}});
  return {{"set", p.label},
          {"kernels", p.kernels},
          {"interpolation", {{"model", errors_json(p.interp_model)}, {"baselines", errors_json(p.interp_baseline)}}},
          {"extrapolation", {{"model", errors_json(p.extrap_model)}, {"baselines", errors_json(p.extrap_baseline)}}},
          {"clock_choice", choice}};
}

void print_json(const gm::CheckInput& in, const gm::ModelCheck& c) {
  nlohmann::json j;
  j["measured"] = "the files' times and energies (time_s, energy_j of the samples; oracle and savings)";
  j["modelled"] = kMethod;
  j["files"] = nlohmann::json::array();
  for (std::size_t i = 0; i < in.files.size(); ++i) j["files"].push_back({{"path", in.files[i]}, {"format", in.formats[i]}});
  j["boards"] = in.board_source;
  j["notes"] = in.notes;
  j["kernels"] = nlohmann::json::array();
  for (const auto& k : c.kernels) {
    nlohmann::json choice = nlohmann::json::array();
    for (const auto& ch : k.choice)
      choice.push_back({{"max_slowdown_pct", 100 * ch.max_slowdown}, {"top_mhz", ch.top_mhz},
                        {"model_mhz", ch.model_mhz}, {"oracle_mhz", ch.oracle_mhz},
                        {"model_saving_pct", 100 * ch.model_saving}, {"oracle_saving_pct", 100 * ch.oracle_saving},
                        {"model_slowdown_pct", 100 * ch.model_slowdown}, {"over_bound", ch.over_bound}});
    j["kernels"].push_back(
        {{"file", k.source},
         {"board", k.gpu},
         {"kernel", k.kernel},
         {"mem_mhz", k.mem_mhz},
         {"clocks", k.clocks},
         {"interpolation",
          {{"calibration_mhz", k.interp_calib_mhz}, {"model", errors_json(gm::model_errors(k.interp))},
           {"baselines", errors_json(gm::baseline_errors(k.interp))}}},
         {"extrapolation",
          {{"calibration_mhz", k.extrap_calib_mhz}, {"model", errors_json(gm::model_errors(k.extrap))},
           {"baselines", errors_json(gm::baseline_errors(k.extrap))}}},
         {"clock_choice", choice}});
  }
  j["pooled"]["per_file"] = nlohmann::json::array();
  for (const auto& p : c.per_file) j["pooled"]["per_file"].push_back(pooled_json(p));
  j["pooled"]["all"] = pooled_json(c.all);
  fmt::print("{}\n", j.dump(2));
}

}  // namespace

void add_validate_model_command(CLI::App& app) {
  struct Opts {
    std::vector<std::string> files;
    model::ModelCheckOptions check;
    bool json = false;
  };
  auto o = std::make_shared<Opts>();
  auto* cmd = app.add_subcommand(
      "validate-model",
      "Check the per-kernel DVFS model against your own measured clock sweeps (docs/sweep-format.md)");
  cmd->add_option("files", o->files, "Sweep files: the open CSV (docs/sweep-format.md) or a public sweep format")
      ->required();
  cmd->add_option("--board", o->check.board, "GPU of files that name none (a shipped spec name, or any name with "
                                             "--power-limit)");
  cmd->add_option("--power-limit", o->check.power_limit_w,
                  "Board power limit, W (for a board without a shipped spec; replaces the spec's)")
      ->check(CLI::PositiveNumber);
  cmd->add_flag("--json", o->json, "Print JSON instead of tables");
  cmd->callback([o] {
    model::CheckInput in;
    model::ModelCheck c;
    try {
      in = model::read_check_input(o->files, o->check);
      if (!o->json)
        for (const auto& n : in.notes) fmt::print(stderr, "gearshift validate-model: {}\n", n);
      c = model::check_model(in);
    } catch (const std::invalid_argument& e) {
      throw Exit(kBadInput, e.what());
    } catch (const std::runtime_error& e) {
      throw Exit(kBadInput, e.what());
    }
    if (o->json)
      print_json(in, c);
    else
      print_text(in, c);
  });
}

}  // namespace gearshift::cli
