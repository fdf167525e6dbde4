// Step variants (trace/step_variants.hpp): the blocks some steps run and others do not, found by diffing each
// step against the template.
#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "step_builder.hpp"
#include "test_paths.hpp"
#include "trace/gearshift_format.hpp"
#include "trace/iteration.hpp"
#include "trace/step_variants.hpp"

namespace gearshift::trace {
namespace {

using test_support::MoeBuilder;

// `steps` steps of an embedding, `body(b, s)` and the optimizer update, 300 µs apart.
template <class Body>
MoeBuilder job_of(int steps, Body body) {
  MoeBuilder b;
  for (int s = 0; s < steps; ++s) {
    b.step_kernels.push_back(0);
    b.step_start.push_back(b.now);
    b.add("embedding_kernel");
    body(b, s);
    b.update("multi_tensor_apply_kernel<TensorListMetadata<4>, AdamW>", 12);
    b.now += 300'000;
  }
  return b;
}

// Megatron-like: gradient clipping (a scale kernel and a copy per parameter) in the steps where `clip(s)`.
template <class Clip>
MoeBuilder clipping_job(int steps, Clip clip) {
  return job_of(steps, [&](MoeBuilder& b, int s) {
    b.pass(6, 0, false);
    b.pass(6, 0, true);
    b.add("norm_two_reduce_kernel");
    b.add("Memcpy DtoH (Device -> Pinned)", OpKind::memcpy);
    if (clip(s))
      for (int i = 0; i < 40; ++i) {
        b.add("mul_scalar_kernel");
        b.add("Memcpy DtoD (Device -> Device)", OpKind::memcpy);
      }
  });
}

// An MoE expert's index sort: cub's radix sort runs as one kernel for few tokens or as eight ops (memsets,
// histogram, exclusive sum, two onesweep passes) for more, by the step's routing (H200 MoE trace, session 18).
// `large(s)`: whether step s runs the eight ops.
template <class Large>
MoeBuilder sort_job(int steps, Large large) {
  return job_of(steps, [&](MoeBuilder& b, int s) {
    b.pass(6, 0, false);
    b.add("index_select_kernel");
    if (large(s)) {
      for (const char* k : {"Memset (Device)", "Memset (Device)", "DeviceRadixSortHistogramKernel",
                            "DeviceRadixSortExclusiveSumKernel", "Memset (Device)", "DeviceRadixSortOnesweepKernel",
                            "Memset (Device)", "DeviceRadixSortOnesweepKernel"})
        b.add(k, std::string(k).starts_with("Memset") ? OpKind::memset : OpKind::kernel);
    } else {
      b.add("DeviceRadixSortSingleTileKernel");
    }
    b.add("index_add_kernel");
    b.pass(6, 0, true);
  });
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

// Before session 18 a step's gap was two blocks, the left-out single-tile kernel (1 op: below min_ops, dropped)
// and the eight inserted ops anchored after it, so the predictor expected the single-tile kernel and then its
// successor, with one unexpected launch each time the sort changed form.
TEST(StepVariants, OtherOpsInAPositionsPlaceAreOneAlternative) {
  const MoeBuilder b = sort_job(12, [](int s) { return s % 3 == 1; });
  const IterationAnalysis a = detect_iterations(b.t);
  const std::size_t single = position_of(a, b.t, "DeviceRadixSortSingleTileKernel");
  ASSERT_NE(single, SIZE_MAX) << "the template is a step of the single-tile sort";
  const auto v = step_variants(b.t, a);
  ASSERT_EQ(v.size(), 1u);
  EXPECT_EQ(v[0].after, static_cast<std::int64_t>(single) - 1);  // after the index_select before it
  EXPECT_EQ(v[0].skip, 1u);
  ASSERT_EQ(v[0].ops.size(), 8u);
  EXPECT_EQ(v[0].ops[2].first, "DeviceRadixSortHistogramKernel");
  EXPECT_EQ(v[0].ops[0].second, OpKind::memset);
  EXPECT_GE(v[0].steps, 3u);

  // The other way round: the eight ops in the template, one kernel in their place in the other steps.
  const MoeBuilder c = sort_job(12, [](int s) { return s % 3 != 1; });
  const IterationAnalysis ca = detect_iterations(c.t);
  const std::size_t first = position_of(ca, c.t, "Memset (Device)");
  ASSERT_NE(first, SIZE_MAX);
  const auto w = step_variants(c.t, ca);
  ASSERT_EQ(w.size(), 1u);
  EXPECT_EQ(w[0].after, static_cast<std::int64_t>(first) - 1);
  EXPECT_EQ(w[0].skip, 8u);
  ASSERT_EQ(w[0].ops.size(), 1u);
  EXPECT_EQ(w[0].ops[0].first, "DeviceRadixSortSingleTileKernel");
}

// The sort blocks of a trace's steps against its template: (single-tile kernel in the template, the other form's
// op count) per alternative; other blocks are counted in `others`.
std::vector<std::pair<bool, std::size_t>> sort_alternatives(const Trace& t, std::size_t& others) {
  const IterationAnalysis a = detect_iterations(t);
  auto single = [](const std::string& n) { return n.find("DeviceRadixSortSingleTileKernel") != std::string::npos; };
  std::vector<std::pair<bool, std::size_t>> out;
  others = 0;
  for (const auto& x : step_variants(t, a)) {
    EXPECT_TRUE(x.skip > 0 && !x.ops.empty()) << "after " << x.after << ": every block is an alternative";
    const bool in_ops = x.ops.size() == 1 && single(x.ops[0].first);
    const bool in_template = x.skip == 1 && single(t.names[a.tmpl.ops[static_cast<std::size_t>(x.after) + 1].name_id]);
    if (in_ops == in_template) {
      ++others;
      continue;
    }
    out.emplace_back(in_template, in_ops ? x.skip : x.ops.size());
  }
  return out;
}

TEST(StepVariants, TheRecordedMoesSortsAreAlternatives) {
  // Three steps of the H200 MoE trace (data/step_traces/README.md): 64 expert index sorts a step, each one
  // kernel or eight ops by its token count. 24 blocks are one sort's other form; 2 are a GEMM that cuBLAS runs
  // with a memset before it or as another tile shape.
  Trace t = import_trace(test::data_path("step_traces/moe_excerpt_3steps.trace.jsonl.gz"));
  std::size_t others = 0;
  auto v = sort_alternatives(t, others);
  ASSERT_EQ(v.size(), 24u);
  EXPECT_EQ(others, 2u);
  EXPECT_EQ(std::count_if(v.begin(), v.end(), [](const auto& x) { return x.first; }), 10);
  for (const auto& [single_in_template, other_form] : v) EXPECT_EQ(other_form, 8u);

  // As `gearshift run --auto` sees the job: the launch feed's kernels only, the other form four kernels.
  std::erase_if(t.ops, [](const OpRecord& r) { return r.kind != OpKind::kernel; });
  v = sort_alternatives(t, others);
  EXPECT_EQ(v.size(), 26u);
  EXPECT_EQ(others, 0u);  // (the GEMMs' memsets are not launches: one kernel for one other, a substitution)
  for (const auto& [single_in_template, other_form] : v) EXPECT_EQ(other_form, 4u);
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
    EXPECT_TRUE(!v[i].ops.empty() || v[i].skip > 0) << "a block inserts or leaves out ops";
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
