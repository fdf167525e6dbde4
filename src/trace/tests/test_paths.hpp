#pragma once

#include <filesystem>
#include <string>

namespace gearshift::test {

// ../shared beside the checkout (CI has it); tests that need it skip when it is absent.
inline std::string shared_path(const std::string& rel) { return std::string(GEARSHIFT_SHARED_DIR) + "/" + rel; }
inline bool have_shared() { return std::filesystem::exists(GEARSHIFT_SHARED_DIR "/data/traces"); }
inline std::string data_path(const std::string& rel) { return std::string(GEARSHIFT_DATA_DIR) + "/" + rel; }

}  // namespace gearshift::test
