// gearshift._core: the C++ core for Python (nanobind). The Python package (python/gearshift) re-exports it;
// users never import this module directly. Errors reach Python as the exception classes of
// gearshift._errors, so the interpreter never sees a C++ exception it cannot name.
#include <chrono>
#include <cstdio>
#include <memory>
#include <optional>
#include <string>
#include <atomic>
#include <thread>
#include <vector>

#include <nanobind/nanobind.h>
#include <nanobind/stl/optional.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include "gearshift/version.hpp"
#include "monitor/sampler.hpp"
#include "runtime/session.hpp"
#include "service/error.hpp"
#include "service/live_plan.hpp"
#include "service/monitor_gpus.hpp"
#include "service/plan_job.hpp"
#include "service/plan_pipeline.hpp"
#include "service/plan_ranks.hpp"
#include "service/verify_run.hpp"
#include "monitor/run_energy.hpp"

namespace nb = nanobind;
using namespace nb::literals;

namespace {

// A Python exception to raise, by the name of its class in gearshift._errors.
struct PyError {
  const char* type;
  std::string message;
};

[[noreturn]] void raise(const char* type, std::string message) { throw PyError{type, std::move(message)}; }

// Zeus-style measurement windows over the sampler thread (monitor/sampler.hpp): the same code as the CLI's.
class Monitor {
 public:
  explicit Monitor(const std::optional<std::vector<unsigned>>& gpu_indices)
      : gpus_(gearshift::service::open_monitor(gpu_indices, [](const std::string& text) {
          std::fprintf(stderr, "gearshift: %s\n", text.c_str());
        })),
        sampler_(std::move(gpus_.sampler)) {}
  std::vector<unsigned> gpu_indices() const {
    std::vector<unsigned> out;
    for (const auto& d : sampler_->devices()) out.push_back(d.index);
    return out;
  }
  void begin(const std::string& name) {
    try {
      sampler_->begin(name);
    } catch (const std::invalid_argument& e) {
      raise("WindowError", e.what());
    }
  }
  nb::dict end(const std::string& name) {
    gearshift::monitor::WindowResult w;
    try {
      nb::gil_scoped_release unlocked;  // end() waits up to one counter period for the next tick
      w = sampler_->end(name);
    } catch (const std::invalid_argument& e) {
      raise("WindowError", e.what());
    }
    nb::dict energy, power, method;
    bool approximate = false, lost = false;
    for (const auto& g : w.gpus) {
      energy[nb::int_(g.gpu)] = g.energy_j;
      power[nb::int_(g.gpu)] = g.avg_power_w;
      method[nb::int_(g.gpu)] = g.method;
      approximate |= g.approximate;
      lost |= g.lost;
    }
    nb::dict d;
    d["name"] = w.name;
    d["time_s"] = gearshift::monitor::to_s(w.time_ns);
    d["energy_j"] = energy;
    d["avg_power_w"] = power;
    d["method"] = method;
    d["approximate"] = approximate;
    d["gpu_lost"] = lost;
    return d;
  }
  void close() {
    nb::gil_scoped_release unlocked;
    sampler_.reset();
  }

 private:
  gearshift::service::MonitorGpus gpus_;  // NVML, kept open while the sampler's devices live
  std::unique_ptr<gearshift::monitor::Sampler> sampler_;
};

// The online runtime in this process: one runtime::Session (the assembly `gearshift run` uses too) with its
// feed pipe, whose write end (`fd`) an in-process hook (the CUPTI injection) writes the launch feed to; lines
// also come through `feed_line`.
class Runtime {
 public:
  Runtime(const std::string& plan_path, bool apply, unsigned gpu_index, const std::string& dry_run_log,
          const std::string& watchdog_exe, bool verify, double budget, const std::string& verify_log,
          std::uint64_t verify_block_steps, double verify_block_s) {
    plan_ = gearshift::service::load_live_plan(plan_path);  // ServiceError kBadPlan: PlanError
    gearshift::runtime::SessionOptions o;
    o.apply = apply;
    o.gpu = gpu_index;
    o.dry_run_log = dry_run_log;
    o.watchdog_exe = watchdog_exe;
    o.pipe_feed = true;
    session_ = std::make_unique<gearshift::runtime::Session>(o);
    // The plan's switching, as `gearshift run --plan` without --switch-latency-ms / --min-interval-ms.
    gearshift::service::Switching plans_own;
    session_->start(plan_, gearshift::service::scheduler_options(plan_, plans_own));
    // Measured verification (service/verify_run.hpp), as `gearshift run` runs it: here a thread of its own reads
    // the runtime's step count every millisecond (no feed reader of ours sees each event).
    gearshift::service::VerifyOptions vo;
    vo.enabled = verify;
    vo.budget = budget;
    vo.log_path = verify_log;
    vo.block_steps = verify_block_steps;
    vo.block_seconds = verify_block_s;
    if (verify) {
      energy_ = std::make_unique<gearshift::monitor::RunEnergy>(gpu_index);
      verifier_ = gearshift::service::make_live_verifier(
          vo, plan_, apply, [this] { return energy_->counter(true); },
          [](std::string_view l) { std::fprintf(stderr, "%.*s\n", static_cast<int>(l.size()), l.data()); },
          gearshift::service::clocks_read(*energy_));
    }
    if (verifier_) poll_ = std::thread([this] { poll(); });
  }
  ~Runtime() { stop_polling(); }
  int fd() const { return session_->feed_fd(); }
  bool writes_clocks() const { return session_->writes_clocks(); }
  std::size_t positions() const { return plan_.size(); }
  bool feed_line(const std::string& line) {
    if (!session_->live()) raise("GearshiftError", "the runtime is stopped");
    return session_->feed_line(line);
  }
  nb::dict stop() {
    gearshift::runtime::SessionStats st;
    {
      nb::gil_scoped_release unlocked;
      stop_polling();
      st = session_->stop();  // reader joined, clocks restored, watchdog told, lock released
    }
    const auto& s = st.live;
    nb::dict d;
    d["launches"] = s.launches;
    d["syncs"] = s.syncs;
    d["markers"] = s.markers;
    d["steps"] = s.steps;
    d["changes"] = s.changes;
    d["dropped"] = s.dropped;
    d["prediction_accuracy"] = s.prediction_accuracy();
    d["in_time_fraction"] = s.in_time_fraction();
    d["dry_run_changes"] = st.dry_run_changes;
    d["verification"] = verifier_ ? verifier_->summary() : std::string();
    return d;
  }

 private:
  void poll() {
    while (!stopping_.load()) {
      verifier_->poll(*session_, std::chrono::steady_clock::now().time_since_epoch().count());
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
  }
  void stop_polling() {
    stopping_.store(true);
    if (poll_.joinable()) poll_.join();
    if (verifier_) verifier_->stop();
  }

  gearshift::runtime::ClockPlan plan_;
  std::unique_ptr<gearshift::runtime::Session> session_;
  std::unique_ptr<gearshift::monitor::RunEnergy> energy_;
  std::unique_ptr<gearshift::service::LiveVerifier> verifier_;
  std::atomic<bool> stopping_{false};
  std::thread poll_;
};

// gearshift plan TRACE -o plan.json, in process: the plan file's JSON text.
std::string plan_trace(const std::string& trace, double max_slowdown, const std::string& gpu) {
  gearshift::service::PlanJobOptions o;
  o.trace_path = o.display_name = trace;
  if (!gpu.empty()) o.gpu = gpu;  // empty: the trace's GPU, as `gearshift plan` without --gpu
  o.max_slowdown = max_slowdown;
  nb::gil_scoped_release unlocked;
  auto r = gearshift::service::run_plan_job(o);
  return gearshift::service::plan_file_json(o, r).dump();
}

// gearshift plan-ranks: {"report": ..., "plans": [plan.json per rank]} as JSON text.
std::string plan_ranks(const std::vector<std::string>& traces, const std::string& gpu, const std::string& strategy,
                       std::optional<double> switch_latency_ms, bool calibrate) {
  gearshift::service::SyncSlackOptions o;
  o.calibrate = calibrate;
  const auto s = gearshift::plan::parse_strategy(strategy);
  if (s != gearshift::plan::Strategy::phase && s != gearshift::plan::Strategy::kernel_global)
    raise("ValueError", "strategy '" + strategy + "': phase or kernel-global");
  o.strategy = *s;
  if (switch_latency_ms) o.switch_latency_ns = *switch_latency_ms * 1e6;  // none: the GPU spec's estimate
  nb::gil_scoped_release unlocked;
  std::vector<gearshift::service::RankInput> inputs;
  std::vector<gearshift::service::GpuChoice> gpus;
  // gpu empty: each trace's GPU, as `gearshift plan-ranks` without --gpu.
  auto r = gearshift::service::run_plan_ranks(traces, gpu.empty() ? std::nullopt : std::optional<std::string>(gpu), o,
                                          &inputs, &gpus);
  nlohmann::json plans = nlohmann::json::array();
  for (std::size_t i = 0; i < inputs.size(); ++i)
    plans.push_back(gearshift::service::rank_plan_file_json(inputs[i], r, i, &gpus.at(i)));
  return nlohmann::json{{"report", gearshift::service::plan_ranks_report_json(traces, r, gpus, inputs)}, {"plans", plans}}.dump();
}

// gearshift pipeline, in process: {"summary": ..., "schedules": ...} as JSON text (modelled, Perseus-style).
std::string plan_pipeline(const std::string& profile_csv, int stages, int microbatches, double straggler,
                          double time_unit_ms, double blocking_power_w) {
  gearshift::service::PipelineJobOptions o;
  o.profile_path = "gathered profile";
  o.profile_text = profile_csv;
  o.stages = stages;
  o.microbatches = microbatches;
  o.straggler = straggler;
  o.time_unit_ms = time_unit_ms;
  o.blocking_power_w = blocking_power_w;
  nb::gil_scoped_release unlocked;
  const auto r = gearshift::service::run_pipeline_job(o);
  return gearshift::service::pipeline_job_json(r).dump();
}

}  // namespace

NB_MODULE(_core, m) {
  m.attr("__version__") = gearshift::kVersion;  // CMake's project(VERSION), the one place it is written
  m.doc() = "gearshift's C++ core (private: use the gearshift package)";
  // Exception classes live in pure Python (gearshift._errors) so users can import and catch them; they are
  // kept alive for the interpreter's lifetime (never released: no teardown-order hazards).
  static PyObject* errors = nb::module_::import_("gearshift._errors").release().ptr();
  nb::register_exception_translator([](const std::exception_ptr& p, void*) {
    auto set = [](const char* type, const std::string& msg) {
      PyObject* cls = PyObject_GetAttrString(errors, type);
      if (!cls) {  // a builtin such as ValueError
        PyErr_Clear();
        cls = PyObject_GetAttrString(PyImport_AddModule("builtins"), type);
      }
      PyErr_SetString(cls ? cls : PyExc_RuntimeError, msg.c_str());
      Py_XDECREF(cls);
    };
    try {
      std::rethrow_exception(p);
    } catch (const PyError& e) {
      set(e.type, e.message);
    } catch (const gearshift::runtime::SessionError& e) {
      using Kind = gearshift::runtime::SessionError::Kind;
      set(e.kind() == Kind::kNoGpu          ? "NoGpuError"
          : e.kind() == Kind::kNoPermission ? "GpuPermissionError"
          : e.kind() == Kind::kGpuBusy      ? "GpuBusyError"
                                            : "GearshiftError",
          e.what());
    } catch (const gearshift::service::ServiceError& e) {
      using Kind = gearshift::service::ServiceError::Kind;
      set(e.kind() == Kind::kBadInput       ? "TraceError"
          : e.kind() == Kind::kNoIteration  ? "NoIterationError"
          : e.kind() == Kind::kBadArgument  ? "ValueError"
          : e.kind() == Kind::kModelRefused ? "ModelRefusedError"
          : e.kind() == Kind::kBadProfile   ? "ProfileError"
          : e.kind() == Kind::kBadPlan      ? "PlanError"
          : e.kind() == Kind::kNoGpu        ? "NoGpuError"
          : e.kind() == Kind::kNoPermission ? "GpuPermissionError"
                                            : "GearshiftError",
          e.what());
    }
  });

  nb::class_<Monitor>(m, "_Monitor")
      .def(nb::init<const std::optional<std::vector<unsigned>>&>(), "gpu_indices"_a = nb::none())
      .def_prop_ro("gpu_indices", &Monitor::gpu_indices)
      .def("begin", &Monitor::begin, "name"_a)
      .def("end", &Monitor::end, "name"_a)
      .def("close", &Monitor::close);
  nb::class_<Runtime>(m, "_Runtime")
      .def(nb::init<const std::string&, bool, unsigned, const std::string&, const std::string&, bool, double,
                    const std::string&, std::uint64_t, double>(),
           "plan"_a, "apply"_a, "gpu_index"_a, "dry_run_log"_a, "watchdog_exe"_a, "verify"_a, "budget"_a,
           "verify_log"_a, "verify_block_steps"_a, "verify_block_s"_a)
      .def_prop_ro("fd", &Runtime::fd)
      .def_prop_ro("writes_clocks", &Runtime::writes_clocks)
      .def_prop_ro("positions", &Runtime::positions)
      .def("feed_line", &Runtime::feed_line, "line"_a)
      .def("stop", &Runtime::stop);
  m.def("plan_trace", &plan_trace, "trace"_a, "max_slowdown"_a, "gpu"_a);
  m.def("plan_ranks", &plan_ranks, "traces"_a, "gpu"_a, "strategy"_a, "switch_latency_ms"_a.none(), "calibrate"_a);
  m.def("plan_pipeline", &plan_pipeline, "profile_csv"_a, "stages"_a, "microbatches"_a, "straggler"_a,
        "time_unit_ms"_a, "blocking_power_w"_a);
  m.def("monotonic_ns", [] { return gearshift::runtime::monotonic_ns(); });
  m.def("spec_names", [] { return gearshift::service::spec_names(); });
}
