// A hash map keyed by std::string that is looked up with a std::string_view without building a string: the
// runtime looks up a kernel name per launch (C++20 heterogeneous lookup: a transparent hash and equal_to<>).
#pragma once

#include <cstddef>
#include <functional>
#include <string>
#include <string_view>
#include <unordered_map>

namespace gearshift::runtime {

struct StringHash {
  using is_transparent = void;
  std::size_t operator()(std::string_view s) const noexcept { return std::hash<std::string_view>{}(s); }
};

template <class V>
using StringMap = std::unordered_map<std::string, V, StringHash, std::equal_to<>>;

}  // namespace gearshift::runtime
