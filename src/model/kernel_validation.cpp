#include "model/kernel_validation.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <set>
#include <stdexcept>

#include "model/prior_spread.hpp"

namespace gearshift::model {
namespace {

// The roofline is taken only where T_c + A/f misses a calibration sample by more than this many σ of the
// dataset's measured time scatter (cross-fitted): ~95 % of pure-noise misses stay below 2σ.
// (Set before looking at the held-out errors; not tuned on them.)
constexpr double kKinkNoiseFactor = 2.0;

std::string benchmark_of(const KernelSweep& k) { return k.kernel.substr(0, k.kernel.find('/')); }

double median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const std::size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}


// Solves the 3×3 system A x = b (Gaussian elimination, partial pivoting). Returns false when singular.
bool solve3(double a[3][3], double b[3], double x[3]) {
  for (int c = 0; c < 3; ++c) {
    int p = c;
    for (int r = c + 1; r < 3; ++r)
      if (std::abs(a[r][c]) > std::abs(a[p][c])) p = r;
    if (std::abs(a[p][c]) < 1e-12) return false;
    std::swap(a[p], a[c]);
    std::swap(b[p], b[c]);
    for (int r = c + 1; r < 3; ++r) {
      const double m = a[r][c] / a[c][c];
      for (int k = c; k < 3; ++k) a[r][k] -= m * a[c][k];
      b[r] -= m * b[c];
    }
  }
  for (int c = 2; c >= 0; --c) {
    double s = b[c];
    for (int k = c + 1; k < 3; ++k) s -= a[c][k] * x[k];
    x[c] = s / a[c][c];
  }
  return true;
}

double pipe_activity(const ActivityCounters& c) {
  return std::max({c.fp32_active, c.fp64_active, c.fp16_active, c.tensor_active});
}

// Held-out predictions of a one-clock predictor with coefficients `c`, on the clocks of `like` (same order).
std::vector<HeldOut> one_clock_points(const DvfsModel& board, const std::vector<Sample>& samples,
                                      const std::vector<HeldOut>& like, const KernelCoefficients& c) {
  const Sample& top = samples.back();
  std::vector<HeldOut> out = like;
  for (auto& h : out) {
    const OneClock p = predict_from_one_clock(board, top, c, h.sm_mhz);
    h.model_time_s = p.time_s;
    h.model_energy_j = p.energy_j;
  }
  return out;
}

}  // namespace

KernelClass validation_class(const KernelSweep& k) {
  if (k.suite != "real") return KernelClass::other;
  const std::string n = k.dataset == "nv-dvfs" ? benchmark_of(k) : k.kernel;
  static const std::set<std::string> gemm = {"Matrix_mul", "matrixMul", "2mm", "3mm", "gemm", "syrk"};
  static const std::set<std::string> elementwise = {"VectorAddition_fp32", "VectorAddition_fp64",
                                                    "VectorAddition_int32", "VectorAddition_int64", "vectorAdd",
                                                    "BlackScholes", "blackscholes", "Sinewave"};
  static const std::set<std::string> reduction = {"ScalarProduct_NDRange_fp32", "scalarProd", "reduction",
                                                  "Geometricmean", "LinearRegression_fp32", "LinearRegression_fp64",
                                                  "histogram"};
  static const std::set<std::string> copy = {"Matrix_transpose", "transpose"};
  if (gemm.count(n)) return KernelClass::gemm;
  if (elementwise.count(n)) return KernelClass::elementwise;
  if (reduction.count(n)) return KernelClass::reduction_norm;
  if (copy.count(n)) return KernelClass::copy_memset;
  return KernelClass::other;
}

gpu::GpuSpec validation_spec(const std::string& gpu, const std::vector<const KernelSweep*>& sweeps) {
  if (gpu == "v100") return gpu::find_spec("v100");
  if (gpu == "a100-pcie") return gpu::find_spec("a100");
  if (gpu != "rtx8000" && gpu != "gtxtitanx")
    throw std::invalid_argument("validation_spec: no board model for GPU '" + gpu + "'");
  return stand_in_spec(gpu, gpu == "rtx8000" ? "Quadro RTX 8000 (stand-in spec)" : "GTX Titan X Maxwell (stand-in spec)",
                       sweeps, gpu == "rtx8000" ? 295 : 250);  // board TDPs (NVIDIA product pages)
}

gpu::GpuSpec stand_in_spec(const std::string& name, const std::string& full_name,
                           const std::vector<const KernelSweep*>& sweeps, double power_limit_w) {
  if (!(power_limit_w > 0)) throw std::invalid_argument("stand_in_spec: power limit must be > 0 W for " + name);
  gpu::GpuSpec s;
  s.name = name;
  s.full_name = full_name;
  std::set<int> sm, mem;
  for (const auto* k : sweeps)
    for (const auto& p : k->samples) sm.insert(p.sm_mhz), mem.insert(p.mem_mhz);
  if (sm.size() < 2) throw std::invalid_argument("stand_in_spec: fewer than 2 SM clocks for " + name);
  s.sm_clocks_mhz.assign(sm.begin(), sm.end());
  s.mem_clocks_mhz.assign(mem.begin(), mem.end());
  s.default_sm_clock_mhz = s.sm_clocks_mhz.back();
  s.default_mem_clock_mhz = s.mem_clocks_mhz.back();
  s.max_board_power_w = power_limit_w;
  s.power_limit_min_w = s.power_limit_max_w = s.power_limit_default_w = s.max_board_power_w;
  double lo = 1e9, hi = 1e9;
  for (const auto* k : sweeps)
    for (const auto& p : k->samples) {
      const double w = p.energy_j / p.time_s;
      if (p.sm_mhz == s.sm_clocks_mhz.front()) lo = std::min(lo, w);
      if (p.sm_mhz == s.sm_clocks_mhz.back()) hi = std::min(hi, w);
    }
  s.idle_power_min_clock_w = 0.9 * lo;
  s.idle_power_max_clock_w = 0.9 * hi;
  s.voltage_knee_mhz = s.sm_clocks_mhz[s.sm_clocks_mhz.size() / 2];
  s.memory_power_w_at_max_clock = 0.12 * s.max_board_power_w;
  return s;
}

std::vector<Split> kernel_splits(const std::vector<int>& clocks_mhz) {
  std::vector<int> c = clocks_mhz;
  std::sort(c.begin(), c.end());
  c.erase(std::unique(c.begin(), c.end()), c.end());
  if (c.size() < 4) throw std::invalid_argument("kernel_splits: need at least 4 distinct clocks");
  std::vector<int> ex{c.back()};
  for (int i = static_cast<int>(c.size()) - 2; i >= 0 && ex.size() < 3; --i)
    if (c[i] <= ex.back() - 100) ex.push_back(c[i]);
  if (ex.size() < 3) throw std::invalid_argument("kernel_splits: no 3 clocks 100 MHz apart for the extrapolation split");
  std::reverse(ex.begin(), ex.end());
  return {{"interpolation", {c.front(), c[c.size() / 2], c.back()}}, {"extrapolation", ex}};
}

OneClock predict_from_one_clock(const DvfsModel& board, const Sample& ref, const KernelCoefficients& c, int sm_mhz) {
  const double a = c.sm_share;
  OneClock o;
  o.time_s = ref.time_s * (a * ref.sm_mhz / sm_mhz + 1 - a);
  const double d_ref = board.dynamic_power_w_at(ref.sm_mhz, ref.mem_mhz, c);
  const double above = ref.energy_j / ref.time_s - board.idle_power_w_at(ref.sm_mhz);
  const double k = d_ref > 0 ? std::max(0.0, above / d_ref) : 0.0;
  const double p = board.idle_power_w_at(sm_mhz) + k * board.dynamic_power_w_at(sm_mhz, ref.mem_mhz, c);
  o.energy_j = p * o.time_s;
  return o;
}

double dynamic_share(const DvfsModel& board, const KernelCoefficients& c, ClockPair ref) {
  KernelCoefficients core = c;
  core.mem_traffic = 0;
  core.static_w = 0;
  const double total = board.dynamic_power_w_at(ref.sm_mhz, ref.mem_mhz, c);
  const double dyn = board.dynamic_power_w_at(ref.sm_mhz, ref.mem_mhz, core);
  return total > 0 ? std::clamp(dyn / total, 0.02, 0.98) : 0.98;
}

KernelShape measured_shape(const std::vector<Sample>& sweep, const DvfsModel& board, const KernelCoefficients& prior) {
  if (sweep.size() < 2) throw std::invalid_argument("measured_shape: need at least 2 samples");
  const Sample& top = sweep.back();
  KernelShape s;
  s.ref = {top.sm_mhz, top.mem_mhz};
  // t_pred/t − 1 = y + a·x with y = t_top/t − 1, x = t_top·(f_top/f − 1)/t.
  double sxy = 0, sxx = 0;
  for (const auto& p : sweep) {
    const double y = top.time_s / p.time_s - 1, x = top.time_s * (static_cast<double>(top.sm_mhz) / p.sm_mhz - 1) / p.time_s;
    sxy += x * y, sxx += x * x;
  }
  s.sm_share = sxx > 0 ? std::clamp(-sxy / sxx, 0.0, 1.0) : prior.sm_share;
  double best = std::numeric_limits<double>::infinity();
  for (int i = -400; i <= 400; ++i) {
    const KernelCoefficients c = perturb(prior, 0, i / 100.0);
    const double d_top = board.dynamic_power_w_at(top.sm_mhz, top.mem_mhz, c);
    const double k = std::max(0.0, (top.energy_j / top.time_s - board.idle_power_w_at(top.sm_mhz)) / d_top);
    double err = 0;
    for (const auto& p : sweep) {
      const double pred = board.idle_power_w_at(p.sm_mhz) + k * board.dynamic_power_w_at(p.sm_mhz, p.mem_mhz, c);
      const double r = pred / (p.energy_j / p.time_s) - 1;
      err += r * r;
    }
    if (err < best) best = err, s.activity_log = i / 100.0;
  }
  s.dynamic_share = dynamic_share(board, perturb(prior, 0, s.activity_log), s.ref);
  return s;
}

double CounterRule::apply(const ActivityCounters& top) const {
  return std::clamp(c0 + c1 * top.dram_active + c2 * pipe_activity(top), 0.0, 1.0);
}

CounterRule fit_counter_rule(const std::vector<const SweepEval*>& training) {
  double a[3][3] = {}, b[3] = {};
  int n = 0;
  for (const auto* e : training) {
    if (e->counters.empty() || !e->counters.back().measured) continue;
    const ActivityCounters& c = e->counters.back();
    const double x[3] = {1.0, c.dram_active, pipe_activity(c)};
    for (int i = 0; i < 3; ++i) {
      for (int j = 0; j < 3; ++j) a[i][j] += x[i] * x[j];
      b[i] += x[i] * e->measured.sm_share;
    }
    ++n;
  }
  double x[3] = {0, 0, 0};
  if (n < 3 || !solve3(a, b, x)) throw std::invalid_argument("fit_counter_rule: fewer than 3 independent kernels");
  return {x[0], x[1], x[2], n};
}

KernelValidation validate_kernels(const std::vector<KernelSweep>& sweeps, const std::map<std::string, gpu::GpuSpec>& specs) {
  KernelValidation v;
  std::map<std::string, std::vector<const KernelSweep*>> by_gpu;
  for (const auto& k : sweeps) by_gpu[k.gpu].push_back(&k);
  for (const auto& [gpu, ks] : by_gpu) {
    auto given = specs.find(gpu);
    v.specs.emplace(gpu, given != specs.end() ? given->second : validation_spec(gpu, ks));
  }

  // Units: one per (kernel, memory clock) with ≥ 4 clocks; fold by the kernel's index in its (dataset, GPU).
  std::map<std::pair<std::string, std::string>, int> counter;
  for (const auto& k : sweeps) {
    const int fold = counter[{k.dataset, k.gpu}]++ % 2;
    std::set<int> mems;
    for (const auto& s : k.samples) mems.insert(s.mem_mhz);
    for (int m : mems) {
      SweepEval e;
      e.dataset = k.dataset, e.gpu = k.gpu, e.suite = k.suite, e.kernel = k.kernel, e.source = k.source, e.mem_mhz = m;
      e.cls = validation_class(k);
      e.fold = fold;
      for (std::size_t i = 0; i < k.samples.size(); ++i) {
        if (k.samples[i].mem_mhz != m) continue;
        e.samples.push_back(k.samples[i]);
        if (!k.counters.empty()) e.counters.push_back(k.counters[i]);
      }
      if (e.samples.size() < 4) continue;
      // b from two memory clocks at the same SM clocks: t(f, m1) − t(f, m2) = B·(1/m1 − 1/m2), b = (B/m_ref)/t_ref.
      if (mems.size() == 2 && m == *mems.rbegin()) {
        const std::vector<Sample> lo = at_memory_clock(k, *mems.begin());
        std::vector<double> bs;
        for (const auto& s : e.samples)
          for (const auto& l : lo)
            if (l.sm_mhz == s.sm_mhz) bs.push_back((l.time_s - s.time_s) / (1.0 / l.mem_mhz - 1.0 / s.mem_mhz));
        if (!bs.empty()) e.mem_share = std::clamp(median(bs) / m / e.samples.back().time_s, 0.0, 1.0);
      }
      v.sweeps.push_back(std::move(e));
    }
  }

  // Board V-curves per (dataset, GPU), each fold's from the other fold's sweeps.
  std::map<std::tuple<std::string, std::string, int>, PowerParams> curves;
  std::map<std::tuple<std::string, std::string, int>, PowerParams> fit_boards;
  for (const auto& e : v.sweeps) {
    for (int f = 0; f < 2; ++f) {
      auto key = std::make_tuple(e.dataset, e.gpu, f);
      if (curves.count(key)) continue;
      std::vector<std::vector<Sample>> other;
      for (const auto& o : v.sweeps)
        if (o.dataset == e.dataset && o.gpu == e.gpu && o.fold != f) other.push_back(o.samples);
      const DvfsModel spec_board(v.specs.at(e.gpu));
      curves[key] = other.empty() ? spec_board.params() : fit_voltage_curve(other, spec_board);
      // The 3-clock fit's board also gets the idle line fitted on the other fold (its V-curve kept).
      fit_boards[key] = other.empty() ? curves[key] : fit_idle_line(other, DvfsModel(v.specs.at(e.gpu), curves[key]));
    }
  }
  for (const auto& [key, p] : curves) v.board_curves[{std::get<0>(key) + "/" + std::get<1>(key), std::get<2>(key)}] = p;
  for (const auto& [key, p] : fit_boards) v.fit_boards[{std::get<0>(key) + "/" + std::get<1>(key), std::get<2>(key)}] = p;

  // The measured times' scatter per (dataset, GPU), each fold's from the other fold's sweeps: each interior
  // sample against the T_c + A/f line through its two neighbours (exact for that law, so what is left is noise,
  // plus a kink's curvature at one sample), robust σ = 1.4826·median |r| / √1.5 (the line through two noisy
  // neighbours adds half their variance).
  for (const auto& e : v.sweeps)
    for (int f = 0; f < 2; ++f) {
      const auto key = std::make_pair(e.dataset + "/" + e.gpu, f);
      if (v.time_noise.count(key)) continue;
      std::vector<double> r;
      for (const auto& o : v.sweeps) {
        if (o.dataset != e.dataset || o.gpu != e.gpu || o.fold == f) continue;
        for (std::size_t i = 1; i + 1 < o.samples.size(); ++i) {
          const Sample &a = o.samples[i - 1], &b = o.samples[i], &c = o.samples[i + 1];
          const double xa = 1.0 / a.sm_mhz, xb = 1.0 / b.sm_mhz, xc = 1.0 / c.sm_mhz;
          const double line = a.time_s + (c.time_s - a.time_s) * (xb - xa) / (xc - xa);
          r.push_back(std::abs(b.time_s / line - 1));
        }
      }
      v.time_noise[key] = r.empty() ? 0 : 1.4826 * median(r) / std::sqrt(1.5);
    }

  // The board's time shape per (dataset, GPU), each fold's from the other fold's sweeps, and the rule that
  // decides whether it is used, learnt on that other fold alone (KernelValidation::ShapeCheck).
  for (const auto& e : v.sweeps)
    for (int f = 0; f < 2; ++f) {
      const auto key = std::make_pair(e.dataset + "/" + e.gpu, f);
      if (v.time_shapes.count(key)) continue;
      std::vector<const SweepEval*> other;
      for (const auto& o : v.sweeps)
        if (o.dataset == e.dataset && o.gpu == e.gpu && o.fold != f) other.push_back(&o);
      std::vector<std::vector<Sample>> samples;
      for (const auto* o : other) samples.push_back(o->samples);
      v.time_shapes[key] = samples.empty() ? TimeShape{} : fit_time_shape(samples);
      KernelValidation::ShapeCheck check;
      if (other.size() >= 4) {
        const DvfsModel spec_board(v.specs.at(e.gpu));
        FitOptions flat;
        flat.kink_tolerance = std::max(flat.kink_tolerance, kKinkNoiseFactor * v.time_noise.at(key));
        std::vector<HeldOut> without, with;
        for (int half = 0; half < 2; ++half) {
          std::vector<std::vector<Sample>> learn;
          for (std::size_t i = 0; i < other.size(); ++i)
            if (static_cast<int>(i % 2) != half) learn.push_back(other[i]->samples);
          FitOptions shaped = flat;
          shaped.time_shape = fit_time_shape(learn);
          for (std::size_t i = 0; i < other.size(); ++i) {
            if (static_cast<int>(i % 2) != half) continue;
            std::vector<int> clocks;
            for (const auto& s : other[i]->samples) clocks.push_back(s.sm_mhz);
            for (const Split& sp : kernel_splits(clocks)) {
              const auto a = evaluate_split(other[i]->samples, sp, spec_board, flat);
              const auto b = evaluate_split(other[i]->samples, sp, spec_board, shaped);
              without.insert(without.end(), a.begin(), a.end());
              with.insert(with.end(), b.begin(), b.end());
            }
          }
        }
        check.without_pct = model_errors(without).time_mape_pct;
        check.with_pct = model_errors(with).time_mape_pct;
        check.checked = true;
        check.used = check.with_pct < check.without_pct;
      }
      v.shape_checks[key] = check;
    }

  for (auto& e : v.sweeps) {
    const gpu::GpuSpec& spec = v.specs.at(e.gpu);
    const DvfsModel board(spec, curves.at({e.dataset, e.gpu, e.fold}));
    const DvfsModel fit_board(spec, fit_boards.at({e.dataset, e.gpu, e.fold}));
    FitOptions flat;
    flat.kink_tolerance = std::max(flat.kink_tolerance, kKinkNoiseFactor * v.time_noise.at({e.dataset + "/" + e.gpu, e.fold}));
    FitOptions fo = flat;
    if (v.shape_checks.at({e.dataset + "/" + e.gpu, e.fold}).used)
      fo.time_shape = v.time_shapes.at({e.dataset + "/" + e.gpu, e.fold});
    std::vector<int> clocks;
    for (const auto& s : e.samples) clocks.push_back(s.sm_mhz);
    const auto splits = kernel_splits(clocks);
    e.interp = evaluate_split(e.samples, splits[0], fit_board, fo);
    e.extrap = evaluate_split(e.samples, splits[1], fit_board, fo);
    FitOptions additive;
    additive.roofline = false;
    e.interp_additive = evaluate_split(e.samples, splits[0], fit_board, additive);
    e.extrap_additive = evaluate_split(e.samples, splits[1], fit_board, additive);
    e.interp_flat = evaluate_split(e.samples, splits[0], fit_board, flat);
    e.extrap_flat = evaluate_split(e.samples, splits[1], fit_board, flat);
    for (int i = 0; i < 2; ++i) {
      std::vector<Sample> calib;
      for (const auto& s : e.samples)
        if (std::count(splits[i].calib_mhz.begin(), splits[i].calib_mhz.end(), s.sm_mhz)) calib.push_back(s);
      const FittedKernel k = fit_kernel(calib, fit_board, fo);
      (i ? e.extrap_law : e.interp_law) = k.time_law;
      if (i == 0) {  // the same fit and predictions as evaluate_split's, at every clock
        const DvfsModel m = k.model(spec);
        for (const auto& s : e.samples) {
          const Prediction p = predict(m, k, s.sm_mhz);
          e.interp_every.push_back({s.sm_mhz, s.time_s, s.energy_j, p.time_ns * 1e-9, p.energy_j,
                                    baseline_time_s(calib, s.sm_mhz), baseline_energy_j(calib, s.sm_mhz)});
        }
      }
      (i ? e.extrap_rises : e.interp_rises) = !fo.time_shape.empty() && k.time_rises;
    }
    if (e.gpu == "v100") {
      const DvfsModel spec_board(spec);
      e.interp_spec = evaluate_split(e.samples, splits[0], spec_board, fo);
      e.extrap_spec = evaluate_split(e.samples, splits[1], spec_board, fo);
    }
    const KernelCoefficients prior = class_prior(e.cls);
    e.measured = measured_shape(e.samples, board, prior);
    e.prior_sm_share = prior.sm_share;
    e.prior_dynamic_share = dynamic_share(board, prior, e.measured.ref);
    e.prior = one_clock_points(board, e.samples, e.interp, prior);
  }

  for (const auto& e : v.sweeps)
    if (e.suite == "real") v.board_activity_log[{e.dataset + "/" + e.gpu, e.fold}] = 0;
  for (auto& [key, med] : v.board_activity_log) {
    std::vector<double> z;
    for (const auto& e : v.sweeps)
      if (e.suite == "real" && e.dataset + "/" + e.gpu == key.first && e.fold == key.second)
        z.push_back(e.measured.activity_log);
    med = median(z);
  }
  for (auto& e : v.sweeps) {
    auto it = v.board_activity_log.find({e.dataset + "/" + e.gpu, e.fold});
    e.activity_log_rel = e.measured.activity_log - (it == v.board_activity_log.end() ? 0.0 : it->second);
  }

  // The prior-adjustment rule (a = the class's median measured a in the other fold) and the counter rule,
  // each learnt on one fold and applied to the other.
  // A fold without 3 kernels whose counters were measured at the top clock, or whose counters cannot tell the
  // coefficients apart, gets no rule (n = 0): its kernels have no counter figures.
  for (int f = 0; f < 2; ++f) {
    std::vector<const SweepEval*> training;
    for (const auto& e : v.sweeps)
      if (e.fold != f && !e.counters.empty()) training.push_back(&e);
    const auto measured = std::count_if(training.begin(), training.end(),
                                        [](const SweepEval* e) { return e->counters.back().measured; });
    if (measured < 3) continue;
    try {
      v.counter_rule[f] = fit_counter_rule(training);
    } catch (const std::invalid_argument&) {
    }
  }
  for (auto& e : v.sweeps) {
    const DvfsModel board(v.specs.at(e.gpu), curves.at({e.dataset, e.gpu, e.fold}));
    std::vector<double> as;
    for (const auto& o : v.sweeps)
      if (o.fold != e.fold && o.cls == e.cls && o.suite == "real") as.push_back(o.measured.sm_share);
    KernelCoefficients adjusted = class_prior(e.cls);
    if (!as.empty()) adjusted.sm_share = median(as);
    adjusted.mem_share = std::min(adjusted.mem_share, 1 - adjusted.sm_share);
    e.prior_adjusted = one_clock_points(board, e.samples, e.interp, adjusted);
    if (!e.counters.empty() && e.counters.back().measured && v.counter_rule[e.fold].n > 0) {
      KernelCoefficients c = class_prior(e.cls);
      c.sm_share = v.counter_rule[e.fold].apply(e.counters.back());
      c.mem_share = std::min(c.mem_share, 1 - c.sm_share);
      e.counter_sm_share = c.sm_share;
      e.counter = one_clock_points(board, e.samples, e.interp, c);
    }
  }
  return v;
}

namespace {
// One sweep per measured kernel for the class figures: the top memory clock where a kernel has two.
bool primary(const KernelValidation& v, const SweepEval& e) {
  if (e.suite != "real") return false;
  for (const auto& o : v.sweeps)
    if (o.dataset == e.dataset && o.gpu == e.gpu && o.kernel == e.kernel && o.mem_mhz > e.mem_mhz) return false;
  return true;
}
}  // namespace

ShapeSpread shape_spread(const KernelValidation& v, KernelClass cls, int fold) {
  ShapeSpread s;
  for (const auto& e : v.sweeps) {
    if (e.cls != cls || (fold >= 0 && e.fold != fold) || !primary(v, e)) continue;
    const double da = e.measured.sm_share - e.prior_sm_share;
    const double z = e.activity_log_rel;
    ++s.n;
    s.sm_share_rms += da * da;
    s.activity_log_rms += z * z;
    s.sm_share_bias += da;
  }
  if (s.n) {
    s.sm_share_rms = std::sqrt(s.sm_share_rms / s.n);
    s.activity_log_rms = std::sqrt(s.activity_log_rms / s.n);
    s.sm_share_bias /= s.n;
  }
  return s;
}

Coverage mini_plan_coverage(const KernelValidation& v, double max_slowdown, bool with_noise, int samples) {
  Coverage c;
  std::vector<double> saving_over_noise;
  NormalDraws draws(20);
  for (const auto& e : v.sweeps) {
    if (!primary(v, e)) continue;
    ShapeSpread sp = shape_spread(v, e.cls, 1 - e.fold);
    if (sp.n < 2) {  // too few kernels of the class in the other fold: the widest class spread there
      sp = {};
      for (KernelClass k : {KernelClass::gemm, KernelClass::elementwise, KernelClass::reduction_norm,
                            KernelClass::copy_memset, KernelClass::other}) {
        const ShapeSpread o = shape_spread(v, k, 1 - e.fold);
        sp.sm_share_rms = std::max(sp.sm_share_rms, o.sm_share_rms);
        sp.activity_log_rms = std::max(sp.activity_log_rms, o.activity_log_rms);
      }
    }
    const DvfsModel board(v.specs.at(e.gpu), v.board_curves.at({e.dataset + "/" + e.gpu, e.fold}));
    KernelCoefficients prior = class_prior(e.cls);
    if (auto it = v.board_activity_log.find({e.dataset + "/" + e.gpu, 1 - e.fold}); it != v.board_activity_log.end())
      prior = perturb(prior, 0, it->second);
    const Sample& top = e.samples.back();
    // The mini-plan: the measured clock with the least predicted energy within the time budget.
    const Sample* best = &top;
    double best_e = top.energy_j;
    for (const auto& s : e.samples) {
      const OneClock p = predict_from_one_clock(board, top, prior, s.sm_mhz);
      if (p.time_s <= (1 + max_slowdown) * top.time_s && p.energy_j < best_e) best = &s, best_e = p.energy_j;
    }
    ++c.kernels;
    if (best == &top) {
      ++c.trivial;
      continue;
    }
    // The measured saving carries the sweep's own noise: two energies, each with the relative scatter of the
    // sweep about its neighbours (second differences: Var(E_i − (E_{i−1} + E_{i+1})/2) = 1.5·σ²).
    double noise = 0;
    for (std::size_t i = 1; i + 1 < e.samples.size(); ++i) {
      const double d = (e.samples[i].energy_j - 0.5 * (e.samples[i - 1].energy_j + e.samples[i + 1].energy_j)) /
                       e.samples[i].energy_j;
      noise += d * d / 1.5;
    }
    const double sweep_noise = e.samples.size() > 2 ? std::sqrt(noise / static_cast<double>(e.samples.size() - 2)) : 0;
    noise = with_noise ? sweep_noise : 0;
    std::vector<double> saving;
    int over = 0;
    for (int i = 0; i < samples; ++i) {
      const double za = draws.next(), zu = draws.next(), zn = draws.next();
      const KernelCoefficients k = perturb(prior, sp.sm_share_rms * za, sp.activity_log_rms * zu);
      const OneClock p = predict_from_one_clock(board, top, k, best->sm_mhz);
      saving.push_back(1 - p.energy_j / top.energy_j + std::sqrt(2.0) * noise * zn);
      over += p.time_s > (1 + max_slowdown) * top.time_s;
    }
    std::sort(saving.begin(), saving.end());
    const double lo = saving[static_cast<std::size_t>(0.05 * (samples - 1))];
    const double hi = saving[static_cast<std::size_t>(0.95 * (samples - 1))];
    const double measured = 1 - best->energy_j / top.energy_j;
    c.inside += measured >= lo && measured <= hi;
    const double saving_sd = std::sqrt(2.0) * sweep_noise;  // of the measured saving: two energies
    if ((measured < lo || measured > hi) && saving_sd > 0 &&
        std::min(std::abs(measured - lo), std::abs(measured - hi)) <= 2 * saving_sd)
      ++c.outside_within_noise;
    saving_over_noise.push_back(saving_sd > 0 ? std::abs(measured) / saving_sd : 0);
    const double expected = 1 - predict_from_one_clock(board, top, prior, best->sm_mhz).energy_j / top.energy_j;
    c.expected_inside += expected >= lo && expected <= hi;
    c.predicted_over_budget += static_cast<double>(over) / samples;
    c.measured_over_budget += best->time_s > (1 + max_slowdown) * top.time_s;
  }
  if (c.kernels > c.trivial) c.predicted_over_budget /= (c.kernels - c.trivial);
  c.median_saving_over_noise = median(saving_over_noise);
  return c;
}

}  // namespace gearshift::model
