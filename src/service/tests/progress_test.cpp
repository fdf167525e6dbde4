// The service's progress lines go to the face's sink, and nowhere without one.
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "service/live_run.hpp"
#include "service/progress.hpp"

namespace gearshift::service {
namespace {

TEST(Progress, AFallbackToTheDefaultSpecIsSaidToTheSinkOnly) {
  std::vector<std::string> lines;
  const ProgressSink sink = [&](std::string_view l) { lines.emplace_back(l); };
  testing::internal::CaptureStdout();
  testing::internal::CaptureStderr();
  EXPECT_EQ(auto_gpu_spec("", {}, 0, false, sink), "h200");  // no NVML: planned for h200, and said so
  EXPECT_EQ(auto_gpu_spec("", {}, 0, false), "h200");        // no sink: nothing said
  EXPECT_EQ(testing::internal::GetCapturedStdout(), "");
  EXPECT_EQ(testing::internal::GetCapturedStderr(), "");
  ASSERT_EQ(lines.size(), 1u);
  EXPECT_EQ(lines[0], "gearshift run --auto: NVML is not at hand; planning for h200 (pass --gpu-spec to choose)");
}

TEST(Progress, AnEmptySinkTakesNothing) {
  say(ProgressSink{}, "dropped");  // must not throw std::bad_function_call
  int calls = 0;
  say([&](std::string_view l) { calls += l == "kept"; }, "kept");
  EXPECT_EQ(calls, 1);
}

}  // namespace
}  // namespace gearshift::service
