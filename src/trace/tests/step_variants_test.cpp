// Step variants (trace/step_variants.hpp): the blocks some steps run and others do not, found by diffing each
// step against the template.
#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "step_builder.hpp"
#include "trace/iteration.hpp"
#include "trace/step_variants.hpp"

namespace gearshift::trace {
namespace {

using test_support::MoeBuilder;

// Megatron-like: gradient clipping (a scale kernel and a copy per parameter) in the steps where `clip(s)`.
template <class Clip>
MoeBuilder clipping_job(int steps, Clip clip) {
  MoeBuilder b;
  for (int s = 0; s < steps; ++s) {
    b.step_kernels.push_back(0);
    b.step_start.push_back(b.now);
    b.add("embedding_kernel");
    b.pass(6, 0, false);
    b.pass(6, 0, true);
    b.add("norm_two_reduce_kernel");
    b.add("Memcpy DtoH (Device -> Pinned)", OpKind::memcpy);
    if (clip(s))
      for (int i = 0; i < 40; ++i) {
        b.add("mul_scalar_kernel");
        b.add("Memcpy DtoD (Device -> Device)", OpKind::memcpy);
      }
    b.update("multi_tensor_apply_kernel<TensorListMetadata<4>, AdamW>", 12);
    b.now += 300'000;
  }
  return b;
}

// The template's first (or last) position of `name`, SIZE_MAX when it has none.
std::size_t position_of(const IterationAnalysis& a, const Trace& t, const std::string& name, bool last = false) {
  std::size_t at = SIZE_MAX;
  for (std::size_t i = 0; i < a.tmpl.ops.size(); ++i)
    if (t.names[a.tmpl.ops[i].name_id] == name && (last || at == SIZE_MAX)) at = i;
  return at;
}

TEST(StepVariants, TheClippingBlockIsAnInsertionAfterTheNormItFollows) {
  const MoeBuilder b = clipping_job(12, [](int s) { return s % 3 == 1; });
  const IterationAnalysis a = detect_iterations(b.t);
  ASSERT_EQ(a.tmpl.kernels, b.step_kernels[0]);  // the plain step
  std::size_t clipped = 0;
  for (const Iteration& it : a.iterations) clipped += it.kernel_count > a.tmpl.kernels;
  ASSERT_GE(clipped, 3u);
  const auto v = step_variants(b.t, a);
  ASSERT_EQ(v.size(), 1u);
  EXPECT_EQ(v[0].after, static_cast<std::int64_t>(position_of(a, b.t, "Memcpy DtoH (Device -> Pinned)", true)));
  EXPECT_EQ(v[0].skip, 0u);
  EXPECT_EQ(v[0].steps, clipped);
  ASSERT_EQ(v[0].ops.size(), 80u);
  EXPECT_EQ(v[0].ops[0].first, "mul_scalar_kernel");
  EXPECT_EQ(v[0].ops[0].second, OpKind::kernel);
  EXPECT_EQ(v[0].ops[1].second, OpKind::memcpy);
}

TEST(StepVariants, ATemplateWithTheBlockGivesASkipForTheStepsWithout) {
  const MoeBuilder b = clipping_job(12, [](int s) { return s % 3 != 1; });
  const IterationAnalysis a = detect_iterations(b.t);
  const std::size_t first = position_of(a, b.t, "mul_scalar_kernel");
  ASSERT_NE(first, SIZE_MAX) << "the template is the clipping step";
  const auto v = step_variants(b.t, a);
  ASSERT_EQ(v.size(), 1u);
  EXPECT_EQ(v[0].after, static_cast<std::int64_t>(first) - 1);
  EXPECT_EQ(v[0].skip, 80u);
  EXPECT_TRUE(v[0].ops.empty());
  EXPECT_GE(v[0].steps, 3u);
}

TEST(StepVariants, AOneOffBlockIsNoVariant) {
  const MoeBuilder b = clipping_job(12, [](int s) { return s == 5; });
  const IterationAnalysis a = detect_iterations(b.t);
  EXPECT_TRUE(step_variants(b.t, a).empty());
  StepVariantOptions once;
  once.min_steps = 1;
  EXPECT_EQ(step_variants(b.t, a, once).size(), 1u);
}

TEST(StepVariants, RoutingNoiseIsBoundedAndEveryKeptBlockRecurs) {
  MoeBuilder b;
  for (int s = 0; s < 30; ++s) b.step(4, 4);  // an expert without tokens one time in four
  const IterationAnalysis a = detect_iterations(b.t);
  StepVariantOptions o;
  o.max_variants = 8;
  const auto v = step_variants(b.t, a, o);
  ASSERT_FALSE(v.empty());
  EXPECT_LE(v.size(), 8u);
  std::size_t inserted = 0;
  for (std::size_t i = 0; i < v.size(); ++i) {
    EXPECT_GE(v[i].steps, 2u);
    EXPECT_GE(v[i].ops.size() + v[i].skip, 2u);
    EXPECT_TRUE(v[i].ops.empty() != (v[i].skip == 0)) << "a block is an insertion or a skip";
    EXPECT_LT(v[i].after + static_cast<std::int64_t>(v[i].skip), static_cast<std::int64_t>(a.tmpl.ops.size()));
    if (i > 0) {
      EXPECT_LE(v[i - 1].after, v[i].after);
    }
    inserted += v[i].ops.size();
  }
  EXPECT_LE(inserted, a.tmpl.ops.size() / 2);
}

TEST(StepVariants, StepsOfAGraphTemplateAreNotCompared) {
  MoeBuilder b = clipping_job(12, [](int s) { return s % 3 == 1; });
  for (auto& r : b.t.ops)
    if (b.t.names[r.name_id] == "embedding_kernel") r.graph_id = 3;
  IterationAnalysis a = detect_iterations(b.t);
  for (auto& op : a.tmpl.ops)
    if (b.t.names[op.name_id] == "embedding_kernel") op.graph_id = 3;
  EXPECT_TRUE(step_variants(b.t, a).empty());
}

}  // namespace
}  // namespace gearshift::trace
