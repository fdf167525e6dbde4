// libgearshift_simgpu.so: a simulated GPU behind NVML's C ABI, so that tests and demos run the real dlopen
// path (point GEARSHIFT_NVML_LIBRARY at this file). One file past 600 lines: it is one C ABI over one shared state
// (locks, counters, faults), and every entry point reads that state's internals. Configured by environment, read
// at nvmlInit_v2:
//   GEARSHIFT_SIMGPU_SPEC     GPU spec name (gpu::find_spec), default "h200"
//   GEARSHIFT_SIMGPU_COUNT    number of GPUs, default 1
//   GEARSHIFT_SIMGPU_POWER_W  constant board power, W; default the spec's idle power at its default SM clock
//   GEARSHIFT_SIMGPU_SM_CLOCK_MHZ  the SM clock read while none is locked (a GPU that sags under its power
//                             limit); default the spec's default SM clock
//   GEARSHIFT_SIMGPU_STATE    file holding state shared by processes (energy-counter epoch, locked clocks);
//                             clock writes are appended to "<state>.clocklog" (format in docs/monitor.md)
//   GEARSHIFT_SIMGPU_POWER_TABLE  file of "SM_MHZ MEM_MHZ WATTS" lines ('#' comments): the board power while those
//                             clocks are locked (or are the defaults), for a stand-in job whose power follows
//                             its clocks (`gearshift calibrate`'s test); other clocks draw GEARSHIFT_SIMGPU_POWER_W.
//                             The energy counter then integrates the power between clock writes.
//   GEARSHIFT_SIMGPU_SWITCH_MS  DOWN[,UP]: after an SM clock lock (in this process) the SM clock read shows the clock
//                             before for this long, ms, lowering / raising (a switch latency to measure)
//   GEARSHIFT_SIMGPU_FAULT    comma list of: no-permission, gpu-lost-after=SECONDS, no-energy-counter,
//                             counter-wrap (the counter is 32-bit and starts 500 J below its wrap),
//                             energy-read-stall=MS (every 30th energy-counter read returns MS ms after it sampled
//                             the counter, as a read on a loaded machine does)
// The energy counter advances in whole steps of the spec's update period (100 ms on H200) of monotonic time since
// the epoch, like a real H200's, so every process sharing a state file reads the same counter.
#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <map>
#include <mutex>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "gpu/nvml_api.hpp"
#include "gpu/spec.hpp"

using namespace gearshift::gpu::nvml_abi;  // NOLINT: the C names of the private ABI header

namespace {

using gearshift::gpu::GpuSpec;

constexpr int kMaxGpus = 8;

struct Lock {
  unsigned sm_min = 0, sm_max = 0, mem_min = 0, mem_max = 0;  // 0 = not locked, MHz
};

struct Sim {
  std::mutex mu;
  int refcount = 0;
  GpuSpec spec;
  int count = 1;
  double power_w = 0;
  unsigned unlocked_sm_mhz = 0;  // GEARSHIFT_SIMGPU_SM_CLOCK_MHZ; 0: the spec's default
  std::string state_path;
  bool fault_no_permission = false, fault_no_counter = false, fault_wrap = false;
  double lost_after_s = -1;
  int energy_read_stall_ms = 0;    // energy-read-stall=MS
  unsigned long energy_reads = 0;  // counts the reads the stall applies to
  std::chrono::steady_clock::time_point init_time;
  long long epoch_ns = 0;  // counter_clock_ns() (CLOCK_MONOTONIC) at which every counter read 0
  Lock locks[kMaxGpus];
  std::string init_error;  // detail for nvmlErrorString(NVML_ERROR_UNKNOWN) after a failed init
  std::map<std::pair<unsigned, unsigned>, double> power_table;  // (SM, memory) MHz -> W; empty: constant power
  // GEARSHIFT_SIMGPU_SWITCH_MS=DOWN[,UP]: after an SM clock lock (in this process), the SM clock read stays at the
  // clock before for this long, ms, lowering (DOWN) or raising (UP): the lock call to the clock taking effect.
  double switch_ms_down = 0, switch_ms_up = 0;
  unsigned sm_before[kMaxGpus] = {};
  std::chrono::steady_clock::time_point switched_at[kMaxGpus] = {};
  // With a power table: energy accumulated up to a time, per GPU (mirrored in the state file when shared).
  double acc_mj[kMaxGpus] = {};
  long long acc_at_ns[kMaxGpus] = {};
};

Sim& sim() {
  static Sim s;
  return s;
}

// Device handles are addresses inside this array, so they stay valid and distinct.
char g_handles[kMaxGpus];

long long realtime_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::system_clock::now().time_since_epoch())
      .count();
}

// The energy counter's time base: CLOCK_MONOTONIC, which every process on the machine shares (so a state file's
// epoch means the same to all) and which time synchronisation does not slew. On CLOCK_REALTIME, a slew of the
// system clock (0.1 % and more measured on the CI machine) made the counter read 0.5 % off the power against the
// monotonic clock gearshift times its windows with (RunAuto.CalibratesToTheUntracedRunsMeasuredPower read 402 W).
long long counter_clock_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

int gpu_of(nvmlDevice_t d) {
  auto* p = reinterpret_cast<char*>(d);
  if (p < g_handles || p >= g_handles + sim().count) return -1;
  return static_cast<int>(p - g_handles);
}

// ---- state file: "key=value" lines; rewritten whole under flock ----

std::map<std::string, std::string> parse_state(const std::string& text) {
  std::map<std::string, std::string> kv;
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) {
    auto eq = line.find('=');
    if (eq != std::string::npos) kv[line.substr(0, eq)] = line.substr(eq + 1);
  }
  return kv;
}

// Runs fn(kv) with the state file locked; writes kv back when fn returns true. False if the file is unusable.
template <class Fn>
bool with_state(const std::string& path, Fn fn) {
  int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  if (fd < 0) return false;
  if (flock(fd, LOCK_EX) != 0) {
    ::close(fd);
    return false;
  }
  std::string text;
  char buf[4096];
  ssize_t n;
  while ((n = ::read(fd, buf, sizeof buf)) > 0) text.append(buf, static_cast<std::size_t>(n));
  auto kv = parse_state(text);
  bool ok = true;
  if (fn(kv)) {
    std::string out;
    for (const auto& [k, v] : kv) out += k + "=" + v + "\n";
    ok = ftruncate(fd, 0) == 0 && pwrite(fd, out.data(), out.size(), 0) == static_cast<ssize_t>(out.size());
  }
  flock(fd, LOCK_UN);
  ::close(fd);
  return ok;
}

std::string lock_key(int gpu, const char* what) { return "gpu" + std::to_string(gpu) + "." + what; }

unsigned current_sm_mhz(const Sim& s, int gpu);
double current_power_w(const Sim& s, int gpu);

void load_locks(Sim& s, const std::map<std::string, std::string>& kv) {
  for (int g = 0; g < s.count; ++g) {
    Lock l;
    if (auto it = kv.find(lock_key(g, "sm_lock")); it != kv.end()) std::sscanf(it->second.c_str(), "%u %u", &l.sm_min, &l.sm_max);
    if (auto it = kv.find(lock_key(g, "mem_lock")); it != kv.end()) std::sscanf(it->second.c_str(), "%u %u", &l.mem_min, &l.mem_max);
    s.locks[g] = l;
    if (auto it = kv.find(lock_key(g, "energy")); it != kv.end())
      std::sscanf(it->second.c_str(), "%lf %lld", &s.acc_mj[g], &s.acc_at_ns[g]);
  }
}

// Reads the shared locks (another process may have changed them). Caller holds s.mu.
void refresh_locks(Sim& s) {
  if (s.state_path.empty()) return;
  with_state(s.state_path, [&](auto& kv) {
    load_locks(s, kv);
    return false;
  });
}

void append_clocklog(const Sim& s, int gpu, const char* op, unsigned lo, unsigned hi) {
  if (s.state_path.empty()) return;
  FILE* f = std::fopen((s.state_path + ".clocklog").c_str(), "a");
  if (!f) return;
  std::fprintf(f, "%lld gpu=%d %s %u %u\n", realtime_ns(), gpu, op, lo, hi);
  std::fclose(f);
}

nvmlReturn_t write_lock(nvmlDevice_t d, const char* key, const char* op, unsigned lo, unsigned hi) {
  Sim& s = sim();
  std::lock_guard<std::mutex> g(s.mu);
  int gpu = gpu_of(d);
  if (s.refcount == 0) return NVML_ERROR_UNINITIALIZED;
  if (gpu < 0) return NVML_ERROR_INVALID_ARGUMENT;
  if (s.lost_after_s >= 0 &&
      std::chrono::duration<double>(std::chrono::steady_clock::now() - s.init_time).count() >= s.lost_after_s) {
    return NVML_ERROR_GPU_IS_LOST;
  }
  if (s.fault_no_permission) return NVML_ERROR_NO_PERMISSION;
  if (lo > hi) return NVML_ERROR_INVALID_ARGUMENT;
  Lock& l = s.locks[gpu];
  bool sm = std::strcmp(key, "sm_lock") == 0;
  if (lo != 0 || hi != 0) {
    const auto& clocks = sm ? s.spec.sm_clocks_mhz : s.spec.mem_clocks_mhz;
    if (static_cast<int>(lo) < clocks.front() || static_cast<int>(hi) > clocks.back()) return NVML_ERROR_INVALID_ARGUMENT;
  }
  // With a power table the old clocks' power is integrated up to now before the clocks change.
  auto accumulate = [&] {
    const long long now = counter_clock_ns();
    s.acc_mj[gpu] += current_power_w(s, gpu) * static_cast<double>(now - s.acc_at_ns[gpu]) / 1e6;
    s.acc_at_ns[gpu] = now;
  };
  auto set = [&] {
    (sm ? l.sm_min : l.mem_min) = lo;
    (sm ? l.sm_max : l.mem_max) = hi;
  };
  if (sm) {
    s.sm_before[gpu] = current_sm_mhz(s, gpu);
    s.switched_at[gpu] = std::chrono::steady_clock::now();
  }
  if (!s.state_path.empty()) {
    std::string value = std::to_string(lo) + " " + std::to_string(hi);
    with_state(s.state_path, [&](auto& kv) {
      load_locks(s, kv);  // another process may have changed them since
      if (!s.power_table.empty()) accumulate();
      set();
      kv[lock_key(gpu, key)] = value;
      char acc[64];
      std::snprintf(acc, sizeof acc, "%.3f %lld", s.acc_mj[gpu], s.acc_at_ns[gpu]);
      if (!s.power_table.empty()) kv[lock_key(gpu, "energy")] = acc;
      return true;
    });
  } else {
    if (!s.power_table.empty()) accumulate();
    set();
  }
  append_clocklog(s, gpu, op, lo, hi);
  return NVML_SUCCESS;
}

// Common checks of every device read: initialised, valid handle, not lost.
nvmlReturn_t check(nvmlDevice_t d, int* gpu) {
  Sim& s = sim();
  if (s.refcount == 0) return NVML_ERROR_UNINITIALIZED;
  *gpu = gpu_of(d);
  if (*gpu < 0) return NVML_ERROR_INVALID_ARGUMENT;
  if (s.lost_after_s >= 0 &&
      std::chrono::duration<double>(std::chrono::steady_clock::now() - s.init_time).count() >= s.lost_after_s) {
    return NVML_ERROR_GPU_IS_LOST;
  }
  return NVML_SUCCESS;
}

unsigned long long counter_mj(const Sim& s, int gpu) {
  const double period_ms =
      s.spec.energy_counter_update_ns > 0 ? static_cast<double>(s.spec.energy_counter_update_ns) / 1e6 : 100.0;
  double elapsed_ms = static_cast<double>(counter_clock_ns() - s.epoch_ns) / 1e6;
  double ticked_ms = std::floor(std::max(0.0, elapsed_ms) / period_ms) * period_ms;
  auto mj = static_cast<unsigned long long>(std::llround(s.power_w * ticked_ms));  // W × ms = mJ
  if (!s.power_table.empty()) {
    // The energy up to the last clock write, then the current clocks' power up to the last tick (never less
    // than the accumulated energy: the counter does not run backwards).
    const double since_ms = static_cast<double>(s.epoch_ns - s.acc_at_ns[gpu]) / 1e6 + ticked_ms;
    mj = static_cast<unsigned long long>(std::llround(s.acc_mj[gpu] + current_power_w(s, gpu) * std::max(0.0, since_ms)));
  }
  if (s.fault_wrap) {
    constexpr unsigned long long kWrap = 1ULL << 32;
    return (kWrap - 500'000ULL + mj) % kWrap;  // 32-bit counter starting 500 J below its wrap
  }
  return mj;
}

unsigned current_sm_mhz(const Sim& s, int gpu) {
  const Lock& l = s.locks[gpu];
  if (l.sm_max) return l.sm_max;
  return s.unlocked_sm_mhz > 0 ? s.unlocked_sm_mhz : static_cast<unsigned>(s.spec.default_sm_clock_mhz);
}

unsigned current_mem_mhz(const Sim& s, int gpu) {
  const Lock& l = s.locks[gpu];
  return l.mem_max ? l.mem_max : static_cast<unsigned>(s.spec.default_mem_clock_mhz);
}

// The board power now: the power table's figure for the current clocks, else the constant power. W.
double current_power_w(const Sim& s, int gpu) {
  if (s.power_table.empty()) return s.power_w;
  auto it = s.power_table.find({current_sm_mhz(s, gpu), current_mem_mhz(s, gpu)});
  return it != s.power_table.end() ? it->second : s.power_w;
}

std::string power_table_error(const char* path) {
  return std::string("simulated GPU: GEARSHIFT_SIMGPU_POWER_TABLE ") + path + ": ";
}

bool parse_power_table(Sim& s, const char* path) {
  s.power_table.clear();
  std::ifstream in(path);
  if (!in) {
    s.init_error = power_table_error(path) + "cannot read it";
    return false;
  }
  std::string line;
  for (int n = 1; std::getline(in, line); ++n) {
    if (line.empty() || line[0] == '#') continue;
    unsigned sm = 0, mem = 0;
    double w = -1;
    std::istringstream ls(line);
    if (!(ls >> sm >> mem >> w) || !(w >= 0) || w > 5000) {
      s.init_error = power_table_error(path) + "line " + std::to_string(n) + " is not \"SM_MHZ MEM_MHZ WATTS\"";
      return false;
    }
    s.power_table[{sm, mem}] = w;
  }
  return true;
}

bool parse_config(Sim& s) {
  const char* spec = std::getenv("GEARSHIFT_SIMGPU_SPEC");
  try {
    s.spec = gearshift::gpu::find_spec(spec && *spec ? spec : "h200");
  } catch (const std::exception& e) {
    s.init_error = std::string("simulated GPU: GEARSHIFT_SIMGPU_SPEC: ") + e.what();
    return false;
  }
  s.count = 1;
  if (const char* c = std::getenv("GEARSHIFT_SIMGPU_COUNT"); c && *c) {
    s.count = std::atoi(c);
    if (s.count < 0 || s.count > kMaxGpus) {
      s.init_error = "simulated GPU: GEARSHIFT_SIMGPU_COUNT must be 0.." + std::to_string(kMaxGpus);
      return false;
    }
  }
  s.power_w = s.spec.idle_power_max_clock_w;
  if (const char* p = std::getenv("GEARSHIFT_SIMGPU_POWER_W"); p && *p) {
    char* end = nullptr;
    s.power_w = std::strtod(p, &end);
    if (end == p || *end != '\0' || !(s.power_w >= 0) || s.power_w > 5000) {
      s.init_error = std::string("simulated GPU: GEARSHIFT_SIMGPU_POWER_W='") + p + "' is not a power in W";
      return false;
    }
  }
  s.unlocked_sm_mhz = 0;
  if (const char* c = std::getenv("GEARSHIFT_SIMGPU_SM_CLOCK_MHZ"); c && *c) {
    char* end = nullptr;
    const long v = std::strtol(c, &end, 10);
    if (end == c || *end != '\0' || v <= 0 || v > 5000) {
      s.init_error = std::string("simulated GPU: GEARSHIFT_SIMGPU_SM_CLOCK_MHZ='") + c + "' is not a clock in MHz";
      return false;
    }
    s.unlocked_sm_mhz = static_cast<unsigned>(v);
  }
  s.power_table.clear();
  if (const char* t = std::getenv("GEARSHIFT_SIMGPU_POWER_TABLE"); t && *t && !parse_power_table(s, t)) return false;
  s.switch_ms_down = s.switch_ms_up = 0;
  for (auto& b : s.sm_before) b = 0;
  if (const char* w = std::getenv("GEARSHIFT_SIMGPU_SWITCH_MS"); w && *w) {
    double down = 0, up = -1;
    const int n = std::sscanf(w, "%lf,%lf", &down, &up);
    if (n < 1 || !(down >= 0) || down > 10'000 || (n == 2 && !(up >= 0 && up <= 10'000))) {
      s.init_error = std::string("simulated GPU: GEARSHIFT_SIMGPU_SWITCH_MS='") + w + "' is not DOWN[,UP] in ms";
      return false;
    }
    s.switch_ms_down = down;
    s.switch_ms_up = n == 2 ? up : down;
  }
  s.fault_no_permission = s.fault_no_counter = s.fault_wrap = false;
  s.lost_after_s = -1;
  s.energy_read_stall_ms = 0;
  s.energy_reads = 0;
  if (const char* f = std::getenv("GEARSHIFT_SIMGPU_FAULT"); f && *f) {
    std::stringstream in(f);
    std::string item;
    while (std::getline(in, item, ',')) {
      if (item == "no-permission") s.fault_no_permission = true;
      else if (item == "no-energy-counter") s.fault_no_counter = true;
      else if (item == "counter-wrap") s.fault_wrap = true;
      else if (item.rfind("gpu-lost-after=", 0) == 0) s.lost_after_s = std::atof(item.c_str() + 15);
      else if (item.rfind("energy-read-stall=", 0) == 0) s.energy_read_stall_ms = std::atoi(item.c_str() + 18);
      else if (!item.empty()) {
        s.init_error = "simulated GPU: unknown GEARSHIFT_SIMGPU_FAULT '" + item +
                       "' (known: no-permission, gpu-lost-after=SECONDS, no-energy-counter, counter-wrap, "
                       "energy-read-stall=MS)";
        return false;
      }
    }
  }
  const char* st = std::getenv("GEARSHIFT_SIMGPU_STATE");
  s.state_path = st ? st : "";
  s.epoch_ns = counter_clock_ns();
  for (auto& l : s.locks) l = Lock{};
  for (int g = 0; g < kMaxGpus; ++g) s.acc_mj[g] = 0, s.acc_at_ns[g] = s.epoch_ns;
  if (!s.state_path.empty()) {
    long long now = s.epoch_ns;
    bool ok = with_state(s.state_path, [&](auto& kv) {
      bool changed = false;
      if (auto it = kv.find("epoch_ns"); it != kv.end()) {
        s.epoch_ns = std::atoll(it->second.c_str());
      } else {
        kv["epoch_ns"] = std::to_string(now);
        changed = true;
      }
      for (int g = 0; g < s.count; ++g) s.acc_at_ns[g] = s.epoch_ns;
      load_locks(s, kv);
      return changed;
    });
    if (!ok) {
      s.init_error = "simulated GPU: cannot use state file " + s.state_path + ": " + std::strerror(errno);
      return false;
    }
  }
  return true;
}

}  // namespace

#define SIMGPU_EXPORT extern "C" __attribute__((visibility("default")))

// Every function of the list, declared with its listed signature: a definition below that differs from the list
// does not compile (a C function cannot be overloaded), and the test NvmlAbi.SimulatedGpuExportsTheList finds a
// missing one.
#define SIMGPU_DECLARE(name, ret, params) SIMGPU_EXPORT ret name params;
GEARSHIFT_NVML_FUNCTIONS(SIMGPU_DECLARE)
#undef SIMGPU_DECLARE

SIMGPU_EXPORT nvmlReturn_t nvmlInit_v2() {
  Sim& s = sim();
  std::lock_guard<std::mutex> g(s.mu);
  if (s.refcount == 0) {
    s.init_error.clear();
    if (!parse_config(s)) return NVML_ERROR_UNKNOWN;
    s.init_time = std::chrono::steady_clock::now();
  }
  ++s.refcount;
  return NVML_SUCCESS;
}

SIMGPU_EXPORT nvmlReturn_t nvmlShutdown() {
  Sim& s = sim();
  std::lock_guard<std::mutex> g(s.mu);
  if (s.refcount == 0) return NVML_ERROR_UNINITIALIZED;
  --s.refcount;
  return NVML_SUCCESS;
}

SIMGPU_EXPORT const char* nvmlErrorString(nvmlReturn_t r) {
  if (r == NVML_ERROR_UNKNOWN) {
    // The detail of a failed init (bad configuration) outlives the call: it is set once, before any reader.
    const std::string& detail = sim().init_error;
    if (!detail.empty()) return detail.c_str();
  }
  switch (r) {
#define SIMGPU_ERROR_TEXT(name, value, errc, text) \
  case name: return text;
    GEARSHIFT_NVML_RETURNS(SIMGPU_ERROR_TEXT)
#undef SIMGPU_ERROR_TEXT
    default: return "Unknown Error";
  }
}

SIMGPU_EXPORT nvmlReturn_t nvmlDeviceGetCount_v2(unsigned* count) {
  Sim& s = sim();
  std::lock_guard<std::mutex> g(s.mu);
  if (s.refcount == 0) return NVML_ERROR_UNINITIALIZED;
  if (!count) return NVML_ERROR_INVALID_ARGUMENT;
  *count = static_cast<unsigned>(s.count);
  return NVML_SUCCESS;
}

SIMGPU_EXPORT nvmlReturn_t nvmlDeviceGetHandleByIndex_v2(unsigned index, nvmlDevice_t* device) {
  Sim& s = sim();
  std::lock_guard<std::mutex> g(s.mu);
  if (s.refcount == 0) return NVML_ERROR_UNINITIALIZED;
  if (!device || index >= static_cast<unsigned>(s.count)) return NVML_ERROR_INVALID_ARGUMENT;
  *device = reinterpret_cast<nvmlDevice_t>(&g_handles[index]);
  return NVML_SUCCESS;
}

#define SIM_BEGIN(d)                               \
  Sim& s = sim();                                  \
  std::lock_guard<std::mutex> guard_(s.mu);        \
  int gpu = 0;                                     \
  if (nvmlReturn_t r_ = check(d, &gpu); r_ != NVML_SUCCESS) return r_

static nvmlReturn_t copy_string(const std::string& text, char* out, unsigned length) {
  if (!out) return NVML_ERROR_INVALID_ARGUMENT;
  if (text.size() + 1 > length) return NVML_ERROR_INSUFFICIENT_SIZE;
  std::memcpy(out, text.c_str(), text.size() + 1);
  return NVML_SUCCESS;
}

SIMGPU_EXPORT nvmlReturn_t nvmlDeviceGetName(nvmlDevice_t d, char* name, unsigned length) {
  SIM_BEGIN(d);
  return copy_string(s.spec.full_name + " (simulated)", name, length);
}

SIMGPU_EXPORT nvmlReturn_t nvmlDeviceGetUUID(nvmlDevice_t d, char* uuid, unsigned length) {
  SIM_BEGIN(d);
  char buf[64];
  std::snprintf(buf, sizeof buf, "GPU-5a1e0000-0000-4000-8000-%012d", gpu);
  return copy_string(buf, uuid, length);
}

SIMGPU_EXPORT nvmlReturn_t nvmlDeviceGetPciInfo_v3(nvmlDevice_t d, nvmlPciInfo_t* pci) {
  SIM_BEGIN(d);
  if (!pci) return NVML_ERROR_INVALID_ARGUMENT;
  *pci = nvmlPciInfo_t{};
  pci->bus = 0x18u + 0x10u * static_cast<unsigned>(gpu);
  std::snprintf(pci->busId, sizeof pci->busId, "00000000:%02X:00.0", pci->bus);
  std::snprintf(pci->busIdLegacy, sizeof pci->busIdLegacy, "0000:%02X:00.0", pci->bus);
  return NVML_SUCCESS;
}

SIMGPU_EXPORT nvmlReturn_t nvmlDeviceGetMigMode(nvmlDevice_t d, unsigned* current, unsigned* pending) {
  SIM_BEGIN(d);
  if (!current || !pending) return NVML_ERROR_INVALID_ARGUMENT;
  *current = *pending = kNvmlDeviceMigDisable;
  return NVML_SUCCESS;
}

SIMGPU_EXPORT nvmlReturn_t nvmlDeviceGetTotalEnergyConsumption(nvmlDevice_t d, unsigned long long* mj) {
  SIM_BEGIN(d);
  if (s.fault_no_counter) return NVML_ERROR_NOT_SUPPORTED;
  if (!mj) return NVML_ERROR_INVALID_ARGUMENT;
  if (!s.power_table.empty()) refresh_locks(s);
  *mj = counter_mj(s, gpu);
  if (s.energy_read_stall_ms > 0 && ++s.energy_reads % 30 == 0)
    std::this_thread::sleep_for(std::chrono::milliseconds(s.energy_read_stall_ms));
  return NVML_SUCCESS;
}

SIMGPU_EXPORT nvmlReturn_t nvmlDeviceGetPowerUsage(nvmlDevice_t d, unsigned* mw) {
  SIM_BEGIN(d);
  if (!mw) return NVML_ERROR_INVALID_ARGUMENT;
  if (!s.power_table.empty()) refresh_locks(s);
  *mw = static_cast<unsigned>(std::lround(current_power_w(s, gpu) * 1000));
  return NVML_SUCCESS;
}

SIMGPU_EXPORT nvmlReturn_t nvmlDeviceGetFieldValues(nvmlDevice_t d, int count, nvmlFieldValue_t* values) {
  SIM_BEGIN(d);
  if (count < 0 || (count > 0 && !values)) return NVML_ERROR_INVALID_ARGUMENT;
  if (!s.power_table.empty()) refresh_locks(s);
  const double power_w = current_power_w(s, gpu);
  for (int i = 0; i < count; ++i) {
    nvmlFieldValue_t& f = values[i];
    f.timestamp = realtime_ns() / 1000;
    f.latencyUsec = 0;
    if (f.fieldId == kNvmlFieldPowerInstant || f.fieldId == kNvmlFieldPowerAverage) {
      f.valueType = NVML_VALUE_TYPE_UNSIGNED_INT;
      f.value.uiVal = static_cast<unsigned>(std::lround(power_w * 1000));  // mW
      f.nvmlReturn = NVML_SUCCESS;
    } else {
      f.nvmlReturn = NVML_ERROR_NOT_SUPPORTED;
    }
  }
  return NVML_SUCCESS;
}

SIMGPU_EXPORT nvmlReturn_t nvmlDeviceGetClockInfo(nvmlDevice_t d, int type, unsigned* mhz) {
  SIM_BEGIN(d);
  if (!mhz) return NVML_ERROR_INVALID_ARGUMENT;
  refresh_locks(s);
  if (type == NVML_CLOCK_SM || type == NVML_CLOCK_GRAPHICS) {
    *mhz = current_sm_mhz(s, gpu);
    // A lock not yet in effect (GEARSHIFT_SIMGPU_SWITCH_MS): the clock before it.
    const double ms = *mhz < s.sm_before[gpu] ? s.switch_ms_down : s.switch_ms_up;
    if (s.sm_before[gpu] != 0 && ms > 0 &&
        std::chrono::steady_clock::now() - s.switched_at[gpu] < std::chrono::duration<double, std::milli>(ms))
      *mhz = s.sm_before[gpu];
  } else if (type == NVML_CLOCK_MEM) {
    const Lock& l = s.locks[gpu];
    *mhz = l.mem_max ? l.mem_max : static_cast<unsigned>(s.spec.default_mem_clock_mhz);
  } else {
    return NVML_ERROR_NOT_SUPPORTED;
  }
  return NVML_SUCCESS;
}

static nvmlReturn_t copy_clocks(std::vector<int> clocks, unsigned* count, unsigned* out) {
  if (!count) return NVML_ERROR_INVALID_ARGUMENT;
  std::sort(clocks.rbegin(), clocks.rend());  // NVML lists clocks highest first
  unsigned cap = *count;
  *count = static_cast<unsigned>(clocks.size());
  if (cap < clocks.size()) return NVML_ERROR_INSUFFICIENT_SIZE;
  if (!out) return NVML_ERROR_INVALID_ARGUMENT;
  for (std::size_t i = 0; i < clocks.size(); ++i) out[i] = static_cast<unsigned>(clocks[i]);
  return NVML_SUCCESS;
}

SIMGPU_EXPORT nvmlReturn_t nvmlDeviceGetSupportedMemoryClocks(nvmlDevice_t d, unsigned* count, unsigned* mhz) {
  SIM_BEGIN(d);
  return copy_clocks(s.spec.mem_clocks_mhz, count, mhz);
}

SIMGPU_EXPORT nvmlReturn_t nvmlDeviceGetSupportedGraphicsClocks(nvmlDevice_t d, unsigned mem_mhz, unsigned* count,
                                                                unsigned* mhz) {
  SIM_BEGIN(d);
  const auto& mem = s.spec.mem_clocks_mhz;
  if (std::find(mem.begin(), mem.end(), static_cast<int>(mem_mhz)) == mem.end()) return NVML_ERROR_NOT_FOUND;
  return copy_clocks(s.spec.sm_clocks_mhz, count, mhz);
}

SIMGPU_EXPORT nvmlReturn_t nvmlDeviceGetTemperature(nvmlDevice_t d, int sensor, unsigned* celsius) {
  SIM_BEGIN(d);
  if (sensor != NVML_TEMPERATURE_GPU || !celsius) return NVML_ERROR_INVALID_ARGUMENT;
  *celsius = static_cast<unsigned>(30 + std::lround(s.power_w / 20));  // a plausible figure, not a model
  return NVML_SUCCESS;
}

SIMGPU_EXPORT nvmlReturn_t nvmlDeviceGetCurrentClocksEventReasons(nvmlDevice_t d, unsigned long long* reasons) {
  SIM_BEGIN(d);
  if (!reasons) return NVML_ERROR_INVALID_ARGUMENT;
  refresh_locks(s);
  *reasons = 0;
  if (s.power_w <= s.spec.idle_power_max_clock_w) *reasons |= kNvmlClocksEventGpuIdle;
  if (s.locks[gpu].sm_max || s.locks[gpu].mem_max) *reasons |= kNvmlClocksEventApplicationsClocksSetting;
  if (s.power_w >= s.spec.power_limit_default_w) *reasons |= kNvmlClocksEventSwPowerCap;
  return NVML_SUCCESS;
}

SIMGPU_EXPORT nvmlReturn_t nvmlDeviceGetEnforcedPowerLimit(nvmlDevice_t d, unsigned* mw) {
  SIM_BEGIN(d);
  if (!mw) return NVML_ERROR_INVALID_ARGUMENT;
  *mw = static_cast<unsigned>(std::lround(s.spec.power_limit_default_w * 1000));
  return NVML_SUCCESS;
}

SIMGPU_EXPORT nvmlReturn_t nvmlDeviceGetAPIRestriction(nvmlDevice_t d, int api, int* state) {
  SIM_BEGIN(d);
  if (api != NVML_RESTRICTED_API_SET_APPLICATION_CLOCKS || !state) return NVML_ERROR_INVALID_ARGUMENT;
  *state = s.fault_no_permission ? NVML_FEATURE_ENABLED : NVML_FEATURE_DISABLED;
  return NVML_SUCCESS;
}

SIMGPU_EXPORT nvmlReturn_t nvmlDeviceSetGpuLockedClocks(nvmlDevice_t d, unsigned min_mhz, unsigned max_mhz) {
  return write_lock(d, "sm_lock", "set-sm", min_mhz, max_mhz);
}
SIMGPU_EXPORT nvmlReturn_t nvmlDeviceResetGpuLockedClocks(nvmlDevice_t d) {
  return write_lock(d, "sm_lock", "reset-sm", 0, 0);
}
SIMGPU_EXPORT nvmlReturn_t nvmlDeviceSetMemoryLockedClocks(nvmlDevice_t d, unsigned min_mhz, unsigned max_mhz) {
  return write_lock(d, "mem_lock", "set-mem", min_mhz, max_mhz);
}
SIMGPU_EXPORT nvmlReturn_t nvmlDeviceResetMemoryLockedClocks(nvmlDevice_t d) {
  return write_lock(d, "mem_lock", "reset-mem", 0, 0);
}
