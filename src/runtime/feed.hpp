// The launch feed (protocol: feed/protocol.hpp) handed to the live runtime.
#pragma once

#include <string_view>

#include "feed/protocol.hpp"
#include "runtime/live.hpp"

namespace gearshift::runtime {

// Hands a parsed event to the runtime.
void feed_event(const feed::FeedEvent& e, LiveRuntime& rt);

// Parses and feeds one line to the runtime; false when it is not a valid event (ignored).
bool feed_line(std::string_view line, LiveRuntime& rt);

}  // namespace gearshift::runtime
