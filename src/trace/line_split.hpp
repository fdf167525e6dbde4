// Splitting a byte stream into lines as it arrives (the runtime's feed and control pipes): one place for the
// framing that `gearshift run`, the Python runtime and the injection library's control reader share.
#pragma once

#include <string>
#include <string_view>

namespace gearshift::trace {

// Appends `data` to `pending`, calls `line(std::string_view)` for each complete line (without its '\n') and
// keeps the unfinished tail in `pending`.
template <class F>
void for_each_line(std::string& pending, std::string_view data, F&& line) {
  pending.append(data);
  std::size_t start = 0;
  for (std::size_t nl; (nl = pending.find('\n', start)) != std::string::npos; start = nl + 1)
    line(std::string_view(pending).substr(start, nl - start));
  pending.erase(0, start);
}

}  // namespace gearshift::trace
