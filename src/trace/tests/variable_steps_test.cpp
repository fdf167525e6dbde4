// Steps whose kernels differ inside (docs/step-detection.md, "Steps that differ inside"): a mixture of experts
// launches only the experts that got tokens, Megatron scales the gradients only when their norm exceeds the
// clip. The optimizer update then delimits the steps; without one (inference) detection still refuses.
#include <gtest/gtest.h>

#include <algorithm>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "step_builder.hpp"
#include "test_paths.hpp"
#include "trace/gearshift_format.hpp"
#include "trace/iteration.hpp"

namespace gearshift::trace {
namespace {

using test_support::MoeBuilder;

double median_of(std::vector<std::size_t> v) {
  std::sort(v.begin(), v.end());
  return (static_cast<double>(v[(v.size() - 1) / 2]) + static_cast<double>(v[v.size() / 2])) / 2;
}

TEST(VariableSteps, RoutingVaryingStepsAreDelimitedByTheOptimizerUpdate) {
  MoeBuilder b;
  for (int s = 0; s < 10; ++s) b.step();
  IterationAnalysis a = detect_iterations(b.t);
  EXPECT_EQ(a.method, "optimizer updates");
  // Steps start after an update ends: the first step (before the first update) is the head, not counted.
  ASSERT_EQ(a.iterations.size(), 9u);
  EXPECT_EQ(a.regular_count(), 9u);
  for (std::size_t k = 0; k < a.iterations.size(); ++k) {  // the true boundaries: steps 2..10 as built
    ASSERT_EQ(b.built_at(a.iterations[k]), k + 1);
    EXPECT_EQ(a.iterations[k].kernel_count, b.step_kernels[k + 1]) << "step " << k + 2;
  }
  const std::vector<std::size_t> whole(b.step_kernels.begin() + 1, b.step_kernels.end());
  const auto distinct = std::set<std::size_t>(whole.begin(), whole.end()).size();
  EXPECT_GE(distinct, 4u);  // the routing really varies the steps
  EXPECT_NEAR(static_cast<double>(a.tmpl.kernels), median_of(whole), 0.02 * median_of(whole));
  EXPECT_EQ(a.evidence.optimizer_updates, 1u);
  EXPECT_GE(a.confidence, kMinStepConfidence);
  EXPECT_LT(a.confidence, 1.0);  // the steps align with the template only in part
  const bool says = std::any_of(a.evidence.lines.begin(), a.evidence.lines.end(), [](const std::string& l) {
    return l.find("the optimizer update delimits the steps") != std::string::npos;
  });
  EXPECT_TRUE(says);
}

TEST(VariableSteps, TwoUpdatesPerStepAmpUnscaleAndOptimizerAreOneStep) {
  MoeBuilder b;
  for (int s = 0; s < 8; ++s) b.step(4, 12, true);
  IterationAnalysis a = detect_iterations(b.t);
  EXPECT_EQ(a.evidence.optimizer_updates, 2u);
  // Each step found is a step built, whichever cut found it (the period's path may keep the first step).
  ASSERT_GE(a.iterations.size(), 6u);
  for (const Iteration& it : a.iterations) {
    const std::size_t k = b.built_at(it);
    ASSERT_LT(k, b.step_kernels.size()) << "a step starting at " << it.start_ns << " ns is no step built";
    EXPECT_EQ(it.kernel_count, b.step_kernels[k]) << "step " << k + 1;
  }
}

TEST(VariableSteps, DataDependentClippingGivesTheCommonStep) {
  // Megatron scales the gradients (a multiply and a copy per parameter) only in steps whose norm exceeds the
  // clip: two step variants; the template is the more common one.
  MoeBuilder b;
  std::size_t plain = 0;
  for (int s = 0; s < 12; ++s) {
    b.step_kernels.push_back(0);
    b.add("embedding_kernel");
    b.pass(6, 0, false);
    b.pass(6, 0, true);
    b.add("norm_two_reduce_kernel");
    b.add("Memcpy DtoH (Device -> Pinned)", OpKind::memcpy);
    if (s % 3 == 1)
      for (int i = 0; i < 40; ++i) {
        b.add("mul_scalar_kernel");
        b.add("Memcpy DtoD (Device -> Device)", OpKind::memcpy);
      }
    b.update("multi_tensor_apply_kernel<TensorListMetadata<4>, AdamW>", 12);
    b.now += 300'000;
    if (s % 3 != 1) plain = b.step_kernels.back();
  }
  IterationAnalysis a = detect_iterations(b.t);
  EXPECT_EQ(a.tmpl.kernels, plain);
  EXPECT_GE(a.iterations.size(), 10u);
  EXPECT_EQ(a.evidence.optimizer_updates, 1u);
  EXPECT_GE(a.confidence, kMinStepConfidence);
}

TEST(VariableSteps, RoutingVaryingInferenceWithoutAnOptimizerIsRefused) {
  // Decode tokens of a MoE: each token's kernels depend on the routing, no optimizer update: no step evidence.
  MoeBuilder b;
  for (int tok = 0; tok < 24; ++tok) {
    b.step_kernels.push_back(0);
    b.add("embedding_kernel");
    b.pass(4, 6, false);
    b.add("lm_head_gemm");
    b.add("argmax_kernel");
    b.add("Memcpy DtoH (Device -> Pinned)", OpKind::memcpy);
    b.now += 150'000;
  }
  EXPECT_THROW(detect_iterations(b.t), NoIterationError);
  IterationOptions trusted;
  trusted.trust_period = true;  // not even the period: the tokens do not repeat one sequence
  EXPECT_THROW(detect_iterations(b.t, trusted), NoIterationError);
}

TEST(VariableSteps, UpdatesAtIrregularDistancesDelimitNoStep) {
  // Each "step" runs another number of layers: the updates recur, but not at a regular op count.
  MoeBuilder b;
  const int layers[] = {1, 6, 2, 9, 1, 4, 12, 2, 7};
  for (int l : layers) b.step(l, 12);
  try {
    detect_iterations(b.t);
    FAIL() << "irregular updates delimited a step";
  } catch (const NoIterationError& e) {
    EXPECT_NE(std::string(e.what()).find("optimizer updates delimit regular steps"), std::string::npos) << e.what();
  }
}

TEST(VariableSteps, AlternatingStepsAreNeverMergedIntoOne) {
  // Two kinds of steps in turn (a short and a long batch), one update each: pairing them as one step of two
  // updates would be a wrong step; their updates are far apart, so detection refuses.
  MoeBuilder b;
  for (int s = 0; s < 10; ++s) b.step(s % 2 ? 8 : 2, 12);
  try {
    IterationAnalysis a = detect_iterations(b.t);
    FAIL() << "a step of " << a.evidence.optimizer_updates << " updates (" << a.tmpl.kernels << " kernels, by " << a.method
           << ") was planned";
  } catch (const NoIterationError& e) {
    EXPECT_NE(std::string(e.what()).find("optimizer updates delimit regular steps"), std::string::npos) << e.what();
  }
}

TEST(VariableSteps, RecordedMoeExcerptIsTheTrueStep) {
  // Steps 22–24 of the 40-step MoE trace (data/step_traces/README.md): kernels between update ends counted in
  // the full trace, 4,650 / 4,645 / 4,656; the full trace's 39 whole steps: median 4,651 (4,632–4,689).
  Trace t = import_trace(test::data_path("step_traces/moe_excerpt_3steps.trace.jsonl.gz"));
  IterationAnalysis a = detect_iterations(t);
  EXPECT_EQ(a.method, "optimizer updates");
  ASSERT_EQ(a.iterations.size(), 3u);
  EXPECT_EQ(a.iterations[0].kernel_count, 4650u);
  EXPECT_EQ(a.iterations[1].kernel_count, 4645u);
  EXPECT_EQ(a.iterations[2].kernel_count, 4656u);
  EXPECT_NEAR(static_cast<double>(a.tmpl.kernels), 4651, 0.01 * 4651);
  EXPECT_EQ(a.evidence.optimizer_updates, 1u);
  EXPECT_GE(a.confidence, kMinStepConfidence);
  // The template idles as long as the steps: its laid-out span is their mean GPU span (138.8–151.9 ms).
  const TemplateOp& last = a.tmpl.ops.back();
  EXPECT_NEAR((last.start_offset_ns + last.duration_ns) / 1e6, (138.823 + 151.862 + 144.577) / 3, 1.0);
}

}  // namespace
}  // namespace gearshift::trace
