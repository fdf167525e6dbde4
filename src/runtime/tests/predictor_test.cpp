#include "runtime/predictor.hpp"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace gearshift::runtime {
namespace {

// A template with repeated "layers" (same names twice) and unique markers, like a transformer step.
std::vector<std::string> layered() {
  return {"embed", "ln", "gemm", "attn", "gemm", "ln", "gemm", "attn", "gemm", "loss", "bwd", "adam"};
}

TEST(Predictor, SearchesThenLocksAndFollowsSteps) {
  PositionPredictor p(layered());
  EXPECT_EQ(p.state(), PredictorState::searching);
  Alignment a = p.observe("embed");  // unique name: locks at once
  EXPECT_EQ(a.state, PredictorState::locked);
  EXPECT_EQ(a.position, 0);
  for (int step = 0; step < 3; ++step)
    for (std::size_t i = (step == 0 ? 1 : 0); i < layered().size(); ++i) {
      a = p.observe(layered()[i]);
      EXPECT_TRUE(a.matched);
      EXPECT_EQ(a.position, static_cast<std::int64_t>(step * 12 + i));
    }
  EXPECT_EQ(p.next_position(), 36);
}

TEST(Predictor, AmbiguousStartNeedsContext) {
  PositionPredictor p(layered());
  // "gemm" occurs four times, "attn gemm" twice: still ambiguous; "ln gemm attn gemm ln" is not (only at 1..5).
  EXPECT_EQ(p.observe("gemm").state, PredictorState::searching);
  EXPECT_EQ(p.observe("attn").state, PredictorState::searching);
  p.observe("gemm");
  Alignment a = p.observe("loss");  // "gemm attn gemm loss" occurs once: positions 6..9
  EXPECT_EQ(a.state, PredictorState::locked);
  EXPECT_EQ(a.position % 12, 9);
}

TEST(Predictor, AbsorbsMissingInsertedAndSwappedKernels) {
  auto t = layered();
  PositionPredictor p(t);
  p.observe("embed");
  // missing "ln" at 1
  Alignment a = p.observe("gemm");
  EXPECT_EQ(a.position, 2);
  // an unknown kernel inserted
  a = p.observe("cudaMemsetAsync-unknown");
  EXPECT_FALSE(a.matched);
  EXPECT_EQ(a.state, PredictorState::locked);
  a = p.observe("attn");
  EXPECT_EQ(a.position, 3);
  for (std::int64_t i = 4; i <= 8; ++i) EXPECT_EQ(p.observe(t[static_cast<std::size_t>(i)]).position, i);
  // swapped pair: "bwd" (10) launched before "loss" (9)
  EXPECT_EQ(p.observe("bwd").position, 10);
  EXPECT_EQ(p.observe("loss").position, 9);
  EXPECT_EQ(p.observe("adam").position, 11);
  EXPECT_EQ(p.observe("embed").position, 12);
  EXPECT_EQ(p.losses(), 0u);
}

TEST(Predictor, FollowsAStepThatSkipsAnExpertsKernels) {
  // A mixture of experts launches only the experts that got tokens: a step may lack an expert's block of
  // kernels. With a beam of 4 a gap of 6 or more positions lost the lock (measured on an H200 MoE trace: 46 %
  // predicted, 1,017 relocks in 39 steps; 95 % with the wider beam).
  std::vector<std::string> t = {"router", "topk"};
  for (int e = 0; e < 4; ++e)
    for (const char* k : {"gather", "gemm_up", "act", "gemm_down", "scale", "scatter", "index_add", "copy"}) {
      std::string name(1, static_cast<char>('0' + e));  // built in steps: GCC 12 warns wrongly on a + chain
      name += '_';
      name += k;
      t.push_back(name);
    }
  t.push_back("adam");
  PositionPredictor p(t);
  for (const auto& n : t) p.observe(n);
  // Next step: expert 1 got no tokens (8 kernels missing).
  // The experts' kernels differ only in name, not class, so which expert a kernel stands for is ambiguous
  // inside the block; the lock must hold and the step's end and the next step come out right.
  const auto n = static_cast<std::int64_t>(t.size());
  for (std::size_t i = 0; i < t.size(); ++i) {
    if (i >= 2 + 8 && i < 2 + 16) continue;
    EXPECT_EQ(p.observe(t[i]).state, PredictorState::locked) << t[i];
  }
  EXPECT_EQ(p.next_position(), 2 * n);  // "adam" was placed at the step's end
  EXPECT_EQ(p.observe("router").position, 2 * n);
  EXPECT_EQ(p.observe("topk").position, 2 * n + 1);
  EXPECT_EQ(p.losses(), 0u);
}

TEST(Predictor, LosesLockOnDivergenceAndResynchronises) {
  PredictorOptions o;
  o.lost_after = 4;
  PositionPredictor p(layered(), o);
  p.observe("embed");
  p.observe("ln");
  for (int i = 0; i < 4; ++i) p.observe("foreign");
  EXPECT_EQ(p.state(), PredictorState::searching);
  EXPECT_EQ(p.losses(), 1u);
  EXPECT_EQ(p.next_position(), -1);
  // A unique name alone is not enough evidence; three launches agreeing with the template are.
  EXPECT_EQ(p.observe("bwd").state, PredictorState::searching);
  EXPECT_EQ(p.observe("adam").state, PredictorState::searching);
  Alignment a = p.observe("embed");
  EXPECT_EQ(a.state, PredictorState::locked);
  EXPECT_EQ(a.position, 12);  // numbering continues forward, into the next step
  EXPECT_EQ(p.relocks(), 2u);
}

TEST(Predictor, RejectsEmptyTemplate) { EXPECT_THROW(PositionPredictor({}), std::invalid_argument); }

}  // namespace
}  // namespace gearshift::runtime

namespace gearshift::runtime {
namespace {

// Another sequence length makes cuBLAS pick other GEMM tile variants: the same step under other GEMM names.
// The predictor places each variant at the GEMM position it replaces (a substitution), never losing the
// step. (Held the wrong value on an H200: 94 % next-position accuracy with a varying sequence length.)
TEST(Predictor, PlacesSameClassVariantsAtTheirPosition) {
  const std::string g1 = "nvjet_sm90_tst_192x192_64x3_2x1_v_bz_coopB_bias_NNN";
  const std::string g2 = "nvjet_sm90_tst_256x128_64x4_1x2_h_bz_coopA_bias_NNT";
  const std::vector<std::string> t = {"embedding_kernel", "layer_norm_kernel", g1, "softmax_kernel", g1, "adam_kernel"};
  PositionPredictor p(t);
  ASSERT_EQ(p.class_of(g1), model::KernelClass::gemm);
  ASSERT_EQ(p.class_of(g2), model::KernelClass::gemm);
  for (const auto& n : t) p.observe(n);  // locks on the first step
  ASSERT_EQ(p.state(), PredictorState::locked);
  std::vector<std::string> varied = t;
  varied[2] = varied[4] = g2;
  for (int step = 1; step <= 3; ++step)
    for (std::size_t i = 0; i < varied.size(); ++i) {
      Alignment a = p.observe(varied[i]);
      EXPECT_EQ(a.position, static_cast<std::int64_t>(step * 6 + i)) << "step " << step << " launch " << i;
      EXPECT_EQ(a.matched, varied[i] == t[i]);
      EXPECT_EQ(a.substituted, varied[i] != t[i]);
    }
  EXPECT_EQ(p.losses(), 0u);
}

// A name of another class is no substitute: an unknown elementwise kernel where a GEMM is due is an insertion.
TEST(Predictor, OtherClassIsNoSubstitute) {
  const std::string g1 = "nvjet_sm90_tst_192x192_64x3_2x1_v_bz_coopB_bias_NNN";
  const std::vector<std::string> t = {"embedding_kernel", "layer_norm_kernel", g1, "softmax_kernel", g1, "adam_kernel"};
  PositionPredictor p(t);
  for (const auto& n : t) p.observe(n);
  p.observe("embedding_kernel");
  p.observe("layer_norm_kernel");
  Alignment a = p.observe("vectorized_elementwise_kernel_add");
  EXPECT_FALSE(a.substituted);
  EXPECT_FALSE(a.matched);
  EXPECT_EQ(a.position, 7);  // stays at layer_norm: an extra kernel
  a = p.observe(g1);
  EXPECT_TRUE(a.matched);
  EXPECT_EQ(a.position, 8);
}


// Megatron-LM-like: a step of layers, then a gradient-clipping block (the same scale kernel once per parameter)
// that only some steps run, then the optimizer (its multi-tensor kernels repeat too, so a search cannot place
// them). `clip(s)`: whether step s runs the block.
struct ClippingSteps {
  std::vector<std::string> base;  // the step without the block
  std::size_t after = 0;          // the block follows base[after]
  std::vector<std::string> block = std::vector<std::string>(40, "mul_scale");
  ClippingSteps() {
    base.push_back("embed");
    for (int l = 0; l < 6; ++l)
      for (const char* k : {"ln", "gemm_qkv", "attn", "gemm_o", "ln", "gemm_up", "gelu", "gemm_down"}) base.push_back(k);
    base.push_back("loss");
    for (int l = 0; l < 6; ++l)
      for (const char* k : {"gemm_down_bwd", "gelu_bwd", "gemm_up_bwd", "ln_bwd", "attn_bwd", "gemm_qkv_bwd"}) base.push_back(k);
    base.push_back("norm_two");
    after = base.size() - 1;
    for (int i = 0; i < 20; ++i) base.push_back("multi_tensor_adam");
  }
  std::vector<std::string> with_block() const {
    auto s = base;
    s.insert(s.begin() + static_cast<std::ptrdiff_t>(after) + 1, block.begin(), block.end());
    return s;
  }
};

// Runs `steps` steps through `p` (a block in the steps where clip(s)); counts launches after the first step and
// those the predictor expected, and checks every launch's reported position.
template <class Clip>
std::pair<std::size_t, std::size_t> run_steps(PositionPredictor& p, const ClippingSteps& c, int steps, Clip clip,
                                              bool block_in_template, bool check_positions = true) {
  std::size_t scored = 0, expected = 0;
  const auto n = static_cast<std::int64_t>(p.size());
  for (int s = 0; s < steps; ++s) {
    const auto launches = clip(s) ? c.with_block() : c.base;
    for (std::size_t i = 0; i < launches.size(); ++i) {
      const Alignment a = p.observe(launches[i]);
      if (s == 0) continue;
      ++scored;
      expected += a.expected;
      if (!check_positions || a.state != PredictorState::locked) continue;
      // Where it must be reported: a block launch at the position it follows (inserted) or its own (in the template).
      const bool in_block = clip(s) && i > c.after && i <= c.after + c.block.size();
      std::int64_t want = 0;
      if (block_in_template) want = static_cast<std::int64_t>(clip(s) || i <= c.after ? i : i + c.block.size());
      else want = static_cast<std::int64_t>(in_block ? c.after : i > c.after && clip(s) ? i - c.block.size() : i);
      EXPECT_EQ(a.position % n, want) << "step " << s << " launch " << i;
      EXPECT_EQ(a.variant, in_block && !block_in_template) << "step " << s << " launch " << i;
    }
  }
  return {scored, expected};
}

TEST(Predictor, FollowsAStepVariantInsertedAfterAPosition) {
  const ClippingSteps c;
  auto clip = [](int s) { return s % 3 != 0; };  // the template lacks the block, two steps in three run it
  {
    PositionPredictor without(c.base);
    const auto [scored, expected] = run_steps(without, c, 12, clip, false, false);
    (void)scored;
    EXPECT_GT(without.losses(), 0u) << "without the variant a 40-launch block loses lock";
    EXPECT_LT(static_cast<double>(expected), 0.9 * static_cast<double>(scored));
  }
  PositionPredictor p(c.base, {}, {{static_cast<std::int64_t>(c.after), c.block, 0}});
  EXPECT_EQ(p.size(), c.base.size());
  const auto [scored, expected] = run_steps(p, c, 12, clip, false);
  EXPECT_EQ(p.losses(), 0u);
  EXPECT_EQ(expected, scored);  // the block entered and the block skipped are both what it expected
}

TEST(Predictor, FollowsStepsThatLeaveOutAVariantOfTheTemplate) {
  const ClippingSteps c;
  auto clip = [](int s) { return s % 3 == 0; };  // the template holds the block, two steps in three skip it
  const auto t = c.with_block();
  {
    PositionPredictor without(t);
    const auto [scored, expected] = run_steps(without, c, 12, clip, true, false);
    EXPECT_GT(without.losses(), 0u) << "without the variant 40 missing positions lose lock";
    EXPECT_LT(static_cast<double>(expected), 0.9 * static_cast<double>(scored));
  }
  PositionPredictor p(t, {}, {{static_cast<std::int64_t>(c.after), {}, c.block.size()}});
  const auto [scored, expected] = run_steps(p, c, 12, clip, true);
  EXPECT_EQ(p.losses(), 0u);
  EXPECT_EQ(expected, scored);
}

// An MoE's expert index sort: one kernel, or four in its place, by the step's token count (session 18). Two
// such sorts a step, each changing form on its own. With the alternative both forms are walked and expected;
// without it, each change of form costs unexpected launches.
TEST(Predictor, FollowsAnAlternativeInEitherForm) {
  const std::vector<std::string> large{"radix_histogram", "radix_exclusive_sum", "radix_onesweep", "radix_onesweep"};
  std::vector<std::string> t{"embed"};
  std::vector<std::size_t> site;  // template positions of the single-tile sort
  for (int l = 0; l < 2; ++l) {
    for (const char* k : {"ln", "gemm_router", "topk", "index_select"}) t.push_back(std::string(k) + std::to_string(l));
    site.push_back(t.size());
    t.push_back("radix_single_tile");
    for (const char* k : {"index_add", "gemm_up", "gelu", "gemm_down"}) t.push_back(std::string(k) + std::to_string(l));
  }
  t.push_back("adam");
  const auto n = static_cast<std::int64_t>(t.size());
  auto launches_of = [&](int s, std::vector<std::int64_t>& want, std::vector<bool>& inserted) {
    std::vector<std::string> out;
    want.clear();
    inserted.clear();
    for (std::size_t p = 0; p < t.size(); ++p) {
      const std::size_t which = p == site[0] ? 0 : p == site[1] ? 1 : 2;
      if (which < 2 && (s >> which) % 2 == 1) {  // step s's bit `which`: the four kernels in its place
        for (const auto& k : large)
          out.push_back(k), want.push_back(static_cast<std::int64_t>(p) - 1), inserted.push_back(true);
        continue;
      }
      out.push_back(t[p]), want.push_back(static_cast<std::int64_t>(p)), inserted.push_back(false);
    }
    return out;
  };
  auto run = [&](PositionPredictor& p, bool check) {
    std::size_t scored = 0, expected = 0;
    std::vector<std::int64_t> want;
    std::vector<bool> inserted;
    for (int s = 0; s < 16; ++s) {
      const auto launches = launches_of(s, want, inserted);
      for (std::size_t i = 0; i < launches.size(); ++i) {
        const Alignment a = p.observe(launches[i]);
        if (s == 0) continue;
        ++scored;
        expected += a.expected;
        if (!check) continue;
        EXPECT_EQ(a.state, PredictorState::locked);
        EXPECT_EQ(a.position % n, want[i]) << "step " << s << " launch " << i;
        EXPECT_EQ(a.variant, inserted[i]) << "step " << s << " launch " << i;
      }
    }
    return std::pair{scored, expected};
  };
  {
    PositionPredictor without(t);
    const auto [scored, expected] = run(without, false);
    EXPECT_LE(expected + 15, scored) << "without the alternative, every change of form is unexpected";
  }
  std::vector<VariantBlock> v;
  for (std::size_t x : site) v.push_back({static_cast<std::int64_t>(x) - 1, large, 1});
  PositionPredictor p(t, {}, v);
  const auto [scored, expected] = run(p, true);
  EXPECT_EQ(p.losses(), 0u);
  EXPECT_EQ(expected, scored);  // both forms, at both sites, in every combination
}

TEST(Predictor, AVariantOutsideTheTemplateIsAnError) {
  const std::vector<std::string> t{"a", "b", "c"};
  EXPECT_THROW(PositionPredictor(t, {}, {{3, {"x"}, 0}}), std::invalid_argument);
  EXPECT_THROW(PositionPredictor(t, {}, {{1, {}, 2}}), std::invalid_argument);  // skips past the last
  EXPECT_THROW(PositionPredictor(t, {}, {{0, {}, 0}}), std::invalid_argument);  // neither
  EXPECT_NO_THROW(PositionPredictor(t, {}, {{-1, {"x"}, 0}, {0, {}, 2}}));
  EXPECT_NO_THROW(PositionPredictor(t, {}, {{0, {"x", "y"}, 1}}));  // an alternative: x y in b's place
}

}  // namespace
}  // namespace gearshift::runtime
