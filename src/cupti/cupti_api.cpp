#include "cupti/cupti_api.hpp"

#include <dlfcn.h>
#include <glob.h>

#include <cstdlib>

#include "cupti/dl_symbol.hpp"

namespace gearshift::cupti {
namespace {

std::vector<std::string> glob_paths(const std::string& pattern) {
  std::vector<std::string> out;
  glob_t g{};
  if (glob(pattern.c_str(), 0, nullptr, &g) == 0)
    for (std::size_t i = 0; i < g.gl_pathc; ++i) out.emplace_back(g.gl_pathv[i]);
  globfree(&g);
  return out;
}

// Fills the table from an opened handle; false (and `error`) when a function is missing or the version is old.
bool fill(CuptiApi& api, std::string* error) {
  bool all = resolve(api.handle, "cuptiSubscribe", api.subscribe) &&
             resolve(api.handle, "cuptiUnsubscribe", api.unsubscribe) &&
             resolve(api.handle, "cuptiEnableCallback", api.enable_callback) &&
             resolve(api.handle, "cuptiActivityEnable", api.activity_enable) &&
             resolve(api.handle, "cuptiActivityDisable", api.activity_disable) &&
             resolve(api.handle, "cuptiActivityRegisterCallbacks", api.activity_register_callbacks) &&
             resolve(api.handle, "cuptiActivityFlushAll", api.activity_flush_all) &&
             resolve(api.handle, "cuptiActivityGetNextRecord", api.activity_get_next_record) &&
             resolve(api.handle, "cuptiActivityGetNumDroppedRecords", api.activity_get_num_dropped_records) &&
             resolve(api.handle, "cuptiGetResultString", api.get_result_string) &&
             resolve(api.handle, "cuptiGetTimestamp", api.get_timestamp) &&
             resolve(api.handle, "cuptiGetVersion", api.get_version);
  if (!all) {
    *error = api.path + " lacks CUPTI activity/callback functions";
    return false;
  }
  if (!resolve(api.handle, "cuptiGetGraphExecId", api.get_graph_exec_id)) api.get_graph_exec_id = nullptr;
  if (api.get_version(&api.version) != CUPTI_SUCCESS || api.version < kMinCuptiApiVersion) {
    *error = api.path + ": CUPTI API version " + std::to_string(api.version) + " is older than " +
             std::to_string(kMinCuptiApiVersion) + " (CUDA 12.0); use CUDA 12 or newer";
    return false;
  }
  return true;
}

}  // namespace

std::string CuptiApi::describe(CUptiResult r) const {
  const char* s = nullptr;
  if (get_result_string == nullptr || get_result_string(r, &s) != CUPTI_SUCCESS || s == nullptr) s = "CUPTI error";
  return std::string(s) + " (code " + std::to_string(static_cast<int>(r)) + ")";
}

std::int64_t CuptiApi::now_ns() const {
  uint64_t t = 0;
  if (get_timestamp == nullptr || get_timestamp(&t) != CUPTI_SUCCESS) return 0;
  return static_cast<std::int64_t>(t);
}

std::vector<std::string> cupti_candidates() {
  std::vector<std::string> c = {"libcupti.so.13", "libcupti.so.12"};
  std::vector<std::string> roots;
  for (const char* v : {"CUDA_HOME", "CUDA_PATH"})
    if (const char* r = std::getenv(v); r != nullptr && *r != '\0') roots.emplace_back(r);
  roots.emplace_back("/usr/local/cuda");
  for (const auto& r : roots)
    for (const char* sub : {"/lib64/", "/extras/CUPTI/lib64/", "/lib/", "/targets/x86_64-linux/lib/"})
      for (const char* so : {"libcupti.so.13", "libcupti.so.12"}) c.push_back(r + sub + so);
  // PyTorch's wheel dependency nvidia-cuda-cupti(-cu12): under any python site-packages we can see.
  for (const char* pat : {"/opt/*/.venv/lib/python3*/site-packages/nvidia/cu*/lib/libcupti.so.1[23]",
                          "/usr/local/lib/python3*/*-packages/nvidia/cu*/lib/libcupti.so.1[23]",
                          "/usr/lib/python3*/*-packages/nvidia/cu*/lib/libcupti.so.1[23]"})
    for (auto& p : glob_paths(pat)) c.push_back(std::move(p));
  if (const char* venv = std::getenv("VIRTUAL_ENV"); venv != nullptr && *venv != '\0')
    for (auto& p : glob_paths(std::string(venv) + "/lib/python3*/site-packages/nvidia/cu*/lib/libcupti.so.1[23]"))
      c.push_back(std::move(p));
  return c;
}

std::optional<CuptiApi> load_cupti(const std::string& override_path, std::string* error) {
  std::string err;
  auto try_open = [&](const std::string& path, int flags) -> std::optional<CuptiApi> {
    CuptiApi api;
    api.handle = dlopen(path.c_str(), flags);
    if (api.handle == nullptr) return std::nullopt;
    api.path = path;
    if (!fill(api, &err)) {
      dlclose(api.handle);
      return std::nullopt;
    }
    // Record the file really loaded (a soname or an already-loaded copy says little about which CUPTI).
    Dl_info info{};
    if (dladdr(reinterpret_cast<void*>(api.get_version), &info) != 0 && info.dli_fname != nullptr)
      api.path = info.dli_fname;
    return api;
  };
  if (!override_path.empty()) {
    if (auto api = try_open(override_path, RTLD_NOW | RTLD_LOCAL)) return api;
    if (error != nullptr)
      *error = err.empty() ? "cannot load $GEARSHIFT_CUPTI_LIBRARY=" + override_path : err;
    return std::nullopt;
  }
  for (const char* so : {"libcupti.so.13", "libcupti.so.12"})
    if (auto api = try_open(so, RTLD_NOW | RTLD_LOCAL | RTLD_NOLOAD)) return api;
  for (const auto& c : cupti_candidates())
    if (auto api = try_open(c, RTLD_NOW | RTLD_LOCAL)) return api;
  if (error != nullptr)
    *error = err.empty() ? "libcupti.so.13/.12 not found (set GEARSHIFT_CUPTI_LIBRARY to its path)" : err;
  return std::nullopt;
}

}  // namespace gearshift::cupti
