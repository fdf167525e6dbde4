#include "model/model_check.hpp"

#include <algorithm>
#include <cstdint>
#include <cmath>
#include <filesystem>
#include <optional>
#include <set>
#include <sstream>
#include <stdexcept>

#include "model/csv_fields.hpp"
#include "model/kernel_validation.hpp"
#include "model/sweep_csv.hpp"

namespace gearshift::model {
namespace {

std::string fmt_w(double w) {
  std::ostringstream s;
  s << w;
  return s.str();
}

// The first line that is neither blank nor a '#' comment, split at commas.
std::vector<std::string> first_fields(const std::string& text) {
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) {
    const auto b = line.find_first_not_of(" \t\r");
    if (b == std::string::npos || line[b] == '#') continue;
    return split_csv(line);
  }
  return {};
}

bool has(const std::vector<std::string>& v, const char* name) { return std::find(v.begin(), v.end(), name) != v.end(); }

// One file read, before its board is resolved.
struct FileKernels {
  std::vector<KernelSweep> kernels;
  std::vector<int> first_line;  // 0 where the format gives none
  double power_limit_w = 0;     // from the file
  bool open_format = false;
};

FileKernels read_one(const std::string& path, const ModelCheckOptions& o, std::string& format,
                     std::vector<std::string>& notes) {
  const std::string text = read_text_file(path);
  const std::string name = std::filesystem::path(path).filename().string();
  FileKernels f;
  const auto b = text.find_first_not_of(" \t\r\n");
  if (b != std::string::npos && text[b] == '{') {
    format = "Kernel Tuner cache";
    f.kernels.push_back(drop_unreached_clocks(parse_kernel_tuner_cache(text, path)));
  } else if (const auto head = first_fields(text); has(head, "kernel-name")) {
    format = "SYnergy CSV";
    for (auto& k : parse_synergy_csv(text, path)) {
      k.suite = name.rfind("merged_", 0) == 0 ? "micro" : "real";
      f.kernels.push_back(drop_unreached_clocks(std::move(k)));
    }
  } else if (has(head, "benchmark") && has(head, "average_power")) {
    format = "NV-DVFS profile CSV";
    std::string gpu = o.board;
    if (gpu.empty() && name.find("-dvfs") != std::string::npos) gpu = name.substr(0, name.find("-dvfs"));
    if (gpu.empty())
      throw std::invalid_argument(path + ": an NV-DVFS-Benchmark profile names no GPU: give --board NAME (or keep "
                                  "the file name's '<gpu>-dvfs-' prefix)");
    for (auto& k : parse_nvdvfs_profile_csv(text, path, gpu)) {
      k.suite = name.find("microbenchmark") != std::string::npos ? "micro" : "real";
      f.kernels.push_back(drop_unreached_clocks(std::move(k)));
    }
  } else {
    format = "open CSV";
    SweepFile s = parse_sweep_csv(text, path);
    if (s.board.empty()) {
      if (o.board.empty())
        throw std::invalid_argument(path + ": names no board: add a 'board' column or a '# board: NAME' line, or "
                                    "give --board NAME");
      for (auto& k : s.kernels) k.gpu = o.board;
    }
    f.kernels = std::move(s.kernels);
    f.first_line = std::move(s.first_line);
    f.power_limit_w = s.power_limit_w;
    f.open_format = true;
    notes.insert(notes.end(), s.notes.begin(), s.notes.end());
  }
  f.first_line.resize(f.kernels.size(), 0);
  return f;
}

}  // namespace

CheckInput read_check_input(const std::vector<std::string>& paths, const ModelCheckOptions& o) {
  if (paths.empty()) throw std::invalid_argument("no sweep file given");
  if (o.power_limit_w < 0) throw std::invalid_argument("the power limit must be > 0 W");
  CheckInput in;
  std::vector<FileKernels> files;
  for (const auto& p : paths) {
    std::string format;
    files.push_back(read_one(p, o, format, in.notes));
    in.files.push_back(p);
    in.formats.push_back(format);
  }

  // Power limit per board: the files' own, then the option; two files of one board must agree.
  std::map<std::string, double> limit;
  std::map<std::string, std::string> limit_from;
  std::map<std::string, bool> public_board, open_board;
  for (std::size_t i = 0; i < files.size(); ++i)
    for (const auto& k : files[i].kernels) {
      (files[i].open_format ? open_board : public_board)[k.gpu] = true;
      if (files[i].power_limit_w <= 0) continue;
      auto [it, added] = limit.try_emplace(k.gpu, files[i].power_limit_w);
      if (added) limit_from[k.gpu] = paths[i];
      if (it->second != files[i].power_limit_w)
        throw std::invalid_argument(paths[i] + ": power limit " + fmt_w(files[i].power_limit_w) + " W for board '" +
                                    k.gpu + "' differs from " + fmt_w(it->second) + " W in " + limit_from[k.gpu]);
    }

  // Board models. The open format's samples without a memory clock get the spec's default memory clock (a
  // label: one memory clock), or 1 on a stand-in board.
  std::set<std::string> gpus;
  for (const auto& f : files)
    for (const auto& k : f.kernels) gpus.insert(k.gpu);
  for (const auto& gpu : gpus) {
    double w = limit.count(gpu) ? limit[gpu] : o.power_limit_w;
    const std::string w_from = limit.count(gpu) ? "# power_limit_w in " + limit_from[gpu] : "--power-limit";
    std::optional<gpu::GpuSpec> spec;
    try {
      spec = gpu::find_spec(gpu);
    } catch (const std::invalid_argument&) {
    }
    for (auto& f : files)
      for (auto& k : f.kernels)
        if (k.gpu == gpu)
          for (auto& s : k.samples)
            if (s.mem_mhz == 0) s.mem_mhz = spec ? spec->default_mem_clock_mhz : 1;
    std::vector<const KernelSweep*> ks;
    for (const auto& f : files)
      for (const auto& k : f.kernels)
        if (k.gpu == gpu) ks.push_back(&k);
    if (spec) {
      in.board_source[gpu] = "spec data/gpus/" + spec->name + ".json (" + spec->full_name + ")";
      if (w > 0) {
        spec->power_limit_default_w = w;
        spec->power_limit_min_w = std::min(spec->power_limit_min_w, w);
        spec->power_limit_max_w = std::max(spec->power_limit_max_w, w);
        in.board_source[gpu] += ", power limit " + fmt_w(w) + " W (" + w_from + ")";
      } else {
        in.board_source[gpu] += ", power limit " + fmt_w(spec->power_limit_default_w) + " W (spec)";
      }
      // Clocks outside the spec's range: the sweep is likely of another board of that name (the fit still runs).
      int lo = INT32_MAX, hi = 0;
      for (const auto* k : ks)
        for (const auto& s : k->samples) lo = std::min(lo, s.sm_mhz), hi = std::max(hi, s.sm_mhz);
      if (lo < spec->min_sm_clock_mhz() || hi > spec->max_sm_clock_mhz())
        in.notes.push_back("board '" + gpu + "': SM clocks " + std::to_string(lo) + "-" + std::to_string(hi) +
                           " MHz measured, outside the spec's " + std::to_string(spec->min_sm_clock_mhz()) + "-" +
                           std::to_string(spec->max_sm_clock_mhz()) + " MHz: is it that GPU?");
      in.boards.emplace(gpu, *spec);
    } else if (w > 0) {
      in.boards.emplace(gpu, stand_in_spec(gpu, gpu + " (stand-in spec)", ks, w));
      in.board_source[gpu] = "no shipped spec: stand-in board (clocks from the sweeps, idle 0.9 x the lowest measured "
                             "power), power limit " + fmt_w(w) + " W (" + w_from + ")";
    } else if (public_board[gpu] && !open_board[gpu]) {
      in.boards.emplace(gpu, validation_spec(gpu, ks));  // throws naming the GPU when it has none
      in.board_source[gpu] = "bench/kernel_validation's board model: " + in.boards.at(gpu).full_name +
                             ", power limit " + fmt_w(in.boards.at(gpu).power_limit_default_w) + " W";
    } else {
      std::string known;
      for (const auto& n : gpu::spec_names()) known += (known.empty() ? "" : ", ") + n;
      std::string where;
      for (std::size_t i = 0; i < files.size(); ++i)
        if (!files[i].kernels.empty() && files[i].kernels.front().gpu == gpu) {
          where = paths[i];
          break;
        }
      throw std::invalid_argument(where + ": board '" + gpu + "' has no shipped spec (known: " + known +
                                  ") and no power limit: give --power-limit W or a '# power_limit_w: W' line");
    }
  }

  // Kernels the check can use: at each memory clock ≥ 4 SM clocks and the two splits' calibration clocks.
  for (std::size_t i = 0; i < files.size(); ++i)
    for (std::size_t j = 0; j < files[i].kernels.size(); ++j) {
      KernelSweep k = std::move(files[i].kernels[j]);
      const std::string at =
          files[i].first_line[j] ? paths[i] + ":" + std::to_string(files[i].first_line[j]) : paths[i];
      std::set<int> mems;
      for (const auto& s : k.samples) mems.insert(s.mem_mhz);
      std::set<int> bad;
      for (int m : mems) {
        std::vector<int> clocks;
        for (const auto& s : k.samples)
          if (s.mem_mhz == m) clocks.push_back(s.sm_mhz);
        const std::string mem = mems.size() > 1 ? " at memory " + std::to_string(m) + " MHz" : "";
        if (clocks.size() < 4) {
          in.notes.push_back(at + ": kernel '" + k.kernel + "'" + mem + " has " + std::to_string(clocks.size()) +
                             " SM clock(s); the check needs at least 4 (3 to calibrate, 1 to predict): skipped");
          bad.insert(m);
          continue;
        }
        try {
          kernel_splits(clocks);
        } catch (const std::invalid_argument&) {
          in.notes.push_back(at + ": kernel '" + k.kernel + "'" + mem +
                             ": no 3 SM clocks at least 100 MHz apart at the top for the extrapolation split: skipped");
          bad.insert(m);
        }
      }
      if (!bad.empty()) {
        std::vector<Sample> s;
        std::vector<ActivityCounters> c;
        for (std::size_t n = 0; n < k.samples.size(); ++n) {
          if (bad.count(k.samples[n].mem_mhz)) continue;
          s.push_back(k.samples[n]);
          if (!k.counters.empty()) c.push_back(k.counters[n]);
        }
        k.samples = std::move(s), k.counters = std::move(c);
      }
      if (!k.samples.empty()) in.kernels.push_back(std::move(k));
    }
  if (in.kernels.empty()) {
    std::string list;
    for (const auto& p : paths) list += (list.empty() ? "" : ", ") + p;
    std::string why;
    for (const auto& n : in.notes) why += "\n  " + n;
    throw std::invalid_argument(list + ": no kernel left to check:" + why);
  }
  return in;
}

ClockChoice choose_clock(const std::vector<HeldOut>& every, double eps) {
  if (every.empty()) throw std::invalid_argument("choose_clock: no samples");
  const HeldOut* top = &every.front();
  for (const auto& h : every)
    if (h.sm_mhz > top->sm_mhz) top = &h;
  const HeldOut *oracle = top, *model = top;
  for (const auto& h : every) {
    if (h.time_s <= (1 + eps) * top->time_s && h.energy_j < oracle->energy_j) oracle = &h;
    if (h.model_time_s <= (1 + eps) * top->model_time_s && h.model_energy_j < model->model_energy_j) model = &h;
  }
  ClockChoice c;
  c.max_slowdown = eps;
  c.top_mhz = top->sm_mhz, c.oracle_mhz = oracle->sm_mhz, c.model_mhz = model->sm_mhz;
  c.oracle_saving = 1 - oracle->energy_j / top->energy_j;
  c.model_saving = 1 - model->energy_j / top->energy_j;
  c.model_slowdown = model->time_s / top->time_s - 1;
  c.over_bound = model->time_s > (1 + eps) * top->time_s;
  return c;
}

namespace {
PooledCheck pool(const std::string& label, const std::vector<const KernelCheck*>& ks) {
  PooledCheck p;
  p.label = label;
  p.kernels = static_cast<int>(ks.size());
  std::vector<HeldOut> i, x;
  for (const auto* k : ks) i.insert(i.end(), k->interp.begin(), k->interp.end()), x.insert(x.end(), k->extrap.begin(), k->extrap.end());
  p.interp_model = model_errors(i), p.interp_baseline = baseline_errors(i);
  p.extrap_model = model_errors(x), p.extrap_baseline = baseline_errors(x);
  for (int b = 0; b < 4; ++b) {
    ChoiceSummary& s = p.choice[b];
    s.max_slowdown = kSlowdownBounds[b];
    double so = 0, sm = 0;
    for (const auto* k : ks) {
      ++s.kernels;
      so += k->choice[b].oracle_saving, sm += k->choice[b].model_saving;
      s.over_bound += k->choice[b].over_bound;
    }
    if (s.kernels) s.oracle_saving_mean = so / s.kernels, s.model_saving_mean = sm / s.kernels;
    s.kept = so > 0 ? sm / so : -1;
  }
  return p;
}
}  // namespace

ModelCheck check_model(const CheckInput& input) {
  const KernelValidation v = validate_kernels(input.kernels, input.boards);
  ModelCheck out;
  for (const auto& e : v.sweeps) {
    KernelCheck k;
    k.source = e.source, k.gpu = e.gpu, k.kernel = e.kernel, k.mem_mhz = e.mem_mhz;
    k.clocks = static_cast<int>(e.samples.size());
    std::vector<int> clocks;
    for (const auto& s : e.samples) clocks.push_back(s.sm_mhz);
    const auto splits = kernel_splits(clocks);
    k.interp_calib_mhz = splits[0].calib_mhz, k.extrap_calib_mhz = splits[1].calib_mhz;
    k.interp = e.interp, k.extrap = e.extrap;
    for (int b = 0; b < 4; ++b) k.choice[b] = choose_clock(e.interp_every, kSlowdownBounds[b]);
    out.kernels.push_back(std::move(k));
  }
  for (const auto& f : input.files) {
    std::vector<const KernelCheck*> ks;
    for (const auto& k : out.kernels)
      if (k.source == f) ks.push_back(&k);
    if (!ks.empty()) out.per_file.push_back(pool(f, ks));
  }
  std::vector<const KernelCheck*> all;
  for (const auto& k : out.kernels) all.push_back(&k);
  out.all = pool("all", all);
  return out;
}

}  // namespace gearshift::model
