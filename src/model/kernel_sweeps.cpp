#include "model/kernel_sweeps.hpp"

#include "model/csv_fields.hpp"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <fstream>
#include <map>
#include <sstream>
#include <stdexcept>

#include <nlohmann/json.hpp>

namespace gearshift::model {
namespace {



int clock_mhz(const std::string& field, const std::string& origin, int line_no, const std::string& column) {
  const double v = csv_number(field, origin, line_no, column);
  if (v <= 0 || v != std::floor(v))
    throw std::invalid_argument(csv_where(origin, line_no) + ": column '" + column + "' must be a whole positive number of "
                                "MHz, got '" + field + "'");
  return static_cast<int>(v);
}

double positive(double v, const std::string& origin, int line_no, const std::string& column) {
  if (!(v > 0))
    throw std::invalid_argument(csv_where(origin, line_no) + ": column '" + column + "' must be > 0, got " +
                                std::to_string(v));
  return v;
}

// A CSV with a header row: column index by name.
struct Header {
  std::vector<std::string> names;
  std::size_t at(const std::string& name, const std::string& origin) const {
    auto it = std::find(names.begin(), names.end(), name);
    if (it == names.end()) throw std::invalid_argument(origin + ":1: missing column '" + name + "'");
    return static_cast<std::size_t>(it - names.begin());
  }
};

struct Rows {
  Header header;
  std::vector<std::pair<int, std::vector<std::string>>> rows;  // (line number, fields)
};

Rows read_rows(const std::string& text, const std::string& origin) {
  std::istringstream in(text);
  std::string line;
  int line_no = 0;
  Rows r;
  while (std::getline(in, line)) {
    ++line_no;
    if (line.empty() || line == "\r") continue;
    auto f = split_csv(line);
    if (r.header.names.empty()) {
      r.header.names = std::move(f);
      continue;
    }
    if (f.size() != r.header.names.size())
      throw std::invalid_argument(csv_where(origin, line_no) + ": expected " + std::to_string(r.header.names.size()) +
                                  " columns, got " + std::to_string(f.size()));
    r.rows.emplace_back(line_no, std::move(f));
  }
  if (r.header.names.empty()) throw std::invalid_argument(origin + ": empty file");
  return r;
}

void sort_samples(KernelSweep& k, const std::string& origin) {
  std::vector<std::size_t> idx(k.samples.size());
  for (std::size_t i = 0; i < idx.size(); ++i) idx[i] = i;
  auto key = [&](std::size_t i) { return std::pair(k.samples[i].mem_mhz, k.samples[i].sm_mhz); };
  std::sort(idx.begin(), idx.end(), [&](std::size_t a, std::size_t b) { return key(a) < key(b); });
  for (std::size_t i = 1; i < idx.size(); ++i)
    if (key(idx[i]) == key(idx[i - 1]))
      throw std::invalid_argument(origin + ": kernel '" + k.kernel + "' has two samples at SM " +
                                  std::to_string(key(idx[i]).second) + " MHz, memory " +
                                  std::to_string(key(idx[i]).first) + " MHz");
  std::vector<Sample> s;
  std::vector<ActivityCounters> c;
  for (std::size_t i : idx) {
    s.push_back(k.samples[i]);
    if (!k.counters.empty()) c.push_back(k.counters[i]);
  }
  k.samples = std::move(s);
  k.counters = std::move(c);
}

}  // namespace

std::string read_text_file(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  if (!f) throw std::runtime_error("cannot open " + path);
  std::ostringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

std::vector<KernelSweep> parse_synergy_csv(const std::string& text, const std::string& origin) {
  const Rows r = read_rows(text, origin);
  const std::size_t name = r.header.at("kernel-name", origin), f = r.header.at("core-freq", origin),
                    m = r.header.at("memory-freq", origin), t = r.header.at("kernel-time [s]", origin),
                    e = r.header.at("mean-energy [J]", origin);
  std::vector<KernelSweep> out;
  std::map<std::string, std::size_t> index;
  for (const auto& [line_no, row] : r.rows) {
    auto [it, added] = index.try_emplace(row[name], out.size());
    if (added) out.push_back({"synergy", "v100", "real", row[name], {}, {}, origin});
    Sample s;
    s.sm_mhz = clock_mhz(row[f], origin, line_no, "core-freq");
    s.mem_mhz = clock_mhz(row[m], origin, line_no, "memory-freq");
    s.time_s = positive(csv_number(row[t], origin, line_no, "kernel-time [s]"), origin, line_no, "kernel-time [s]");
    s.energy_j = positive(csv_number(row[e], origin, line_no, "mean-energy [J]"), origin, line_no, "mean-energy [J]");
    out[it->second].samples.push_back(s);
  }
  for (auto& k : out) sort_samples(k, origin);
  return out;
}

std::vector<KernelSweep> parse_nvdvfs_profile_csv(const std::string& text, const std::string& origin,
                                                  const std::string& gpu) {
  const Rows r = read_rows(text, origin);
  const auto& h = r.header;
  const std::size_t bench = h.at("benchmark", origin), arg = h.at("argNo", origin), f = h.at("core_frequency", origin),
                    m = h.at("memory_frequency", origin), t = h.at("time", origin), p = h.at("average_power", origin);
  const std::size_t c[7] = {h.at("SMACT", origin), h.at("SMOCC", origin), h.at("TENSO", origin), h.at("DRAMA", origin),
                            h.at("FP64A", origin), h.at("FP32A", origin), h.at("FP16A", origin)};
  const char* cname[7] = {"SMACT", "SMOCC", "TENSO", "DRAMA", "FP64A", "FP32A", "FP16A"};
  std::vector<KernelSweep> out;
  std::map<std::string, std::size_t> index;
  for (const auto& [line_no, row] : r.rows) {
    const std::string key = row[bench] + "/" + row[arg];
    auto [it, added] = index.try_emplace(key, out.size());
    if (added) out.push_back({"nv-dvfs", gpu, "real", key, {}, {}, origin});
    Sample s;
    s.sm_mhz = clock_mhz(row[f], origin, line_no, "core_frequency");
    s.mem_mhz = clock_mhz(row[m], origin, line_no, "memory_frequency");
    s.time_s = positive(csv_number(row[t], origin, line_no, "time"), origin, line_no, "time") * 1e-3;  // ms
    s.energy_j = positive(csv_number(row[p], origin, line_no, "average_power"), origin, line_no, "average_power") * s.time_s;
    double v[7] = {0, 0, 0, 0, 0, 0, 0};
    const bool none = std::all_of(std::begin(c), std::end(c), [&](std::size_t i) { return row[i].empty(); });
    for (int i = 0; i < 7 && !none; ++i) {
      v[i] = csv_number(row[c[i]], origin, line_no, cname[i]);
      if (v[i] < 0 || v[i] > 1.0 + 1e-9)
        throw std::invalid_argument(csv_where(origin, line_no) + ": column '" + cname[i] +
                                    "' is an activity ratio in [0, 1], got " + row[c[i]]);
    }
    out[it->second].samples.push_back(s);
    out[it->second].counters.push_back({v[0], v[1], v[2], v[3], v[4], v[5], v[6], !none});
  }
  for (auto& k : out) sort_samples(k, origin);
  return out;
}

std::vector<KernelSweep> parse_gpuptx_csv(const std::string& text, const std::string& origin) {
  std::istringstream in(text);
  std::string line;
  int line_no = 0;
  std::vector<KernelSweep> out;
  std::map<std::string, int> seen;
  while (std::getline(in, line)) {
    ++line_no;
    if (line.empty() || line == "\r") continue;
    auto f = split_csv(line);
    if (f.size() == 1) {  // a kernel-name line starts a block
      std::string name = f[0];
      if (int n = ++seen[name]; n > 1) name += "#" + std::to_string(n);  // stencil2d appears twice (README)
      out.push_back({"gpuptx", "gtxtitanx", "real", name, {}, {}, origin});
      continue;
    }
    if (out.empty()) throw std::invalid_argument(csv_where(origin, line_no) + ": a data line before any kernel name");
    if (f.size() != 5)
      throw std::invalid_argument(csv_where(origin, line_no) + ": expected a kernel name or 5 columns "
                                  "(mem_clock_MHz,core_clock_MHz,time,power_W,energy), got " + std::to_string(f.size()));
    Sample s;
    s.mem_mhz = clock_mhz(f[0], origin, line_no, "mem_clock_MHz");
    s.sm_mhz = clock_mhz(f[1], origin, line_no, "core_clock_MHz");
    s.time_s = positive(csv_number(f[2], origin, line_no, "time"), origin, line_no, "time");
    positive(csv_number(f[3], origin, line_no, "power_W"), origin, line_no, "power_W");
    s.energy_j = positive(csv_number(f[4], origin, line_no, "energy"), origin, line_no, "energy");
    out.back().samples.push_back(s);
  }
  if (line_no == 0) throw std::invalid_argument(origin + ": empty file");
  for (auto& k : out) {
    if (k.samples.empty()) throw std::invalid_argument(origin + ": kernel '" + k.kernel + "' has no data lines");
    sort_samples(k, origin);
  }
  return out;
}

KernelSweep parse_kernel_tuner_cache(const std::string& text, const std::string& origin) {
  const auto j = nlohmann::json::parse(text, nullptr, false);
  if (j.is_discarded() || !j.is_object()) throw std::invalid_argument(origin + ": not a JSON object");
  if (!j.contains("cache") || !j["cache"].is_object() || j["cache"].empty())
    throw std::invalid_argument(origin + ": no 'cache' object with entries (a Kernel Tuner cache file?)");
  KernelSweep k{"kernel-tuner", "a100-pcie", "real", j.value("kernel_name", std::string("kernel")), {}, {}, origin};
  for (const auto& [key, e] : j["cache"].items()) {
    auto num = [&](const char* field) {
      if (!e.contains(field) || !e[field].is_number() || !(e[field].get<double>() > 0))
        throw std::invalid_argument(origin + ": cache['" + key + "']: '" + field + "' missing or not a number > 0");
      return e[field].get<double>();
    };
    const double f = num("nvml_gr_clock");
    if (f != std::floor(f)) throw std::invalid_argument(origin + ": cache['" + key + "']: 'nvml_gr_clock' not whole MHz");
    Sample s;
    s.sm_mhz = static_cast<int>(f);
    s.mem_mhz = 1215;  // not recorded; A100-PCIe-40GB HBM2 clock (one memory clock, so only a label)
    s.time_s = num("time") * 1e-3;
    s.energy_j = num("nvml_power") * s.time_s;
    k.samples.push_back(s);
  }
  sort_samples(k, origin);
  return k;
}

std::vector<Sample> at_memory_clock(const KernelSweep& k, int mem_mhz) {
  std::vector<Sample> out;
  for (const auto& s : k.samples)
    if (s.mem_mhz == mem_mhz) out.push_back(s);
  return out;
}

KernelSweep drop_unreached_clocks(KernelSweep k) {
  int min_mhz = 0;
  // synergy: flat time bands below 472 MHz (README §2), and 472 MHz itself is still in the band for 7 of the
  // 113 kernels (t·f twice that at 480 MHz, e.g. LinearRegression_fp32, BoxBlur, Nbody_local_mem).
  if (k.gpu == "v100" && k.dataset == "synergy") min_mhz = 480;
  if (k.gpu == "v100" && k.dataset == "nv-dvfs") min_mhz = 406;  // the 405 MHz setting was not reached (§3)
  std::vector<Sample> s;
  std::vector<ActivityCounters> c;
  for (std::size_t i = 0; i < k.samples.size(); ++i) {
    if (k.samples[i].sm_mhz < min_mhz) continue;
    s.push_back(k.samples[i]);
    if (!k.counters.empty()) c.push_back(k.counters[i]);
  }
  k.samples = std::move(s);
  k.counters = std::move(c);
  return k;
}

std::vector<KernelSweep> read_kernel_sweeps(const std::string& dir) {
  std::vector<KernelSweep> all;
  auto add = [&](std::vector<KernelSweep> ks, const char* suite) {
    for (auto& k : ks) {
      k.suite = suite;
      all.push_back(drop_unreached_clocks(std::move(k)));
    }
  };
  const std::string syn = dir + "/synergy-sc-ae/models-validation/provided-data/";
  for (const char* name :
       {"BitCompression", "BlackScholes", "BoxBlur", "Ftle", "Geometricmean", "Kmeans_fp32", "Kmeans_fp64", "Knn",
        "LinearRegression_fp32", "LinearRegression_fp64", "Matrix_mul", "Matrix_transpose", "MedianFilter",
        "MerseTwister", "MolecularDynamics", "Nbody_local_mem", "ScalarProduct_NDRange_fp32", "Sinewave", "Sobel3",
        "Sobel5", "Sobel7", "Spmv", "VectorAddition_fp32", "VectorAddition_fp64", "VectorAddition_int32",
        "VectorAddition_int64"}) {
    const std::string p = syn + "testing-data/" + name + ".csv";
    add(parse_synergy_csv(read_text_file(p), p), "real");
  }
  for (const char* name : {"ArithSingleUnit", "ArithLocalMixed", "Stencil", "ArithMixedUnitType", "ArithMixedUnitOp",
                           "GlobalMemory2", "GlobalMemory", "L2Unit", "LocalMemory"}) {
    const std::string p = syn + "training-data/merged_" + std::string(name) + ".csv";
    add(parse_synergy_csv(read_text_file(p), p), "micro");
  }
  for (const char* gpu : {"v100", "rtx8000"})
    for (const char* suite : {"real", "micro"}) {
      const std::string p = dir + "/NV-DVFS-Benchmark/data/" + gpu + "-dvfs-" +
                            (std::string(suite) == "real" ? "real" : "microbenchmark") + "-profile.csv";
      add(parse_nvdvfs_profile_csv(read_text_file(p), p, gpu), suite);
    }
  for (const char* suite : {"real", "micro"}) {
    const std::string p = dir + "/gpuPTXModel/datasets/gtxtitanx/" +
                          (std::string(suite) == "real" ? "realbenchmarks" : "microbenchmarks") +
                          "/aggregated_dataset_gtxtitanx.csv";
    add(parse_gpuptx_csv(read_text_file(p), p), suite);
  }
  const std::string kt =
      dir + "/kernel_tuner_tutorial/d151eb1/energy/data/synthetic_fp32_cache_NVIDIA_A100-PCIE-40GB.json";
  all.push_back(parse_kernel_tuner_cache(read_text_file(kt), kt));
  return all;
}

}  // namespace gearshift::model
