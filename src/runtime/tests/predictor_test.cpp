#include "runtime/predictor.hpp"

#include <gtest/gtest.h>

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
