// Dropping special tokens and renormalising, on hand-built matrices with hand-computed results.
#include "analysis/without_specials.h"

#include <gtest/gtest.h>

#include "headscope/error.h"

namespace headscope::analysis {
namespace {

// [CLS] a b [SEP], one layer, two heads.
SequenceInfo four_units(bool causal) {
  SequenceInfo s;
  s.kinds = {TokenKind::kSpecial, TokenKind::kContent, TokenKind::kPunct, TokenKind::kSpecial};
  s.ids = {101, 7, 8, 102};
  s.causal = causal;
  return s;
}

Tensor two_heads(const std::vector<float>& h0, const std::vector<float>& h1) {
  Tensor t({1, 2, 4, 4});
  std::copy(h0.begin(), h0.end(), t.data.begin());
  std::copy(h1.begin(), h1.end(), t.data.begin() + 16);
  return t;
}

TEST(DropSpecialUnits, RemovesSpecialsAndRescalesRows) {
  const Tensor att = two_heads(
      {
          1.0f, 0.0f, 0.0f, 0.0f,  // [CLS]
          0.5f, 0.3f, 0.1f, 0.1f,  // a: kept mass 0.4 → 0.75, 0.25
          0.6f, 0.0f, 0.2f, 0.2f,  // b: kept mass 0.2 → 0, 1
          0.0f, 0.0f, 0.0f, 1.0f,  // [SEP]
      },
      {
          0.25f,
          0.25f,
          0.25f,
          0.25f,  //
          0.9f,
          0.0f,
          0.0f,
          0.1f,  // a: no kept mass → stays zero
          0.0f,
          0.5f,
          0.5f,
          0.0f,  // b: already all on kept keys
          0.25f,
          0.25f,
          0.25f,
          0.25f,
      });
  const WithoutSpecials w = drop_special_units(att, four_units(false));
  EXPECT_EQ(w.kept, (std::vector<int32_t>{1, 2}));
  EXPECT_EQ(w.attention.shape, (std::vector<int64_t>{1, 2, 2, 2}));
  const std::vector<float> want = {0.75f, 0.25f, 0.0f, 1.0f, 0.0f, 0.0f, 0.5f, 0.5f};
  for (size_t i = 0; i < want.size(); ++i) EXPECT_NEAR(w.attention.data[i], want[i], 1e-6) << i;
  EXPECT_EQ(w.units.kinds, (std::vector<TokenKind>{TokenKind::kContent, TokenKind::kPunct}));
  EXPECT_EQ(w.units.ids, (std::vector<int32_t>{7, 8}));
}

TEST(DropSpecialUnits, KeepsTheCausalMask) {
  // BOS a b EOS in a decoder: row b may see BOS, a, b; without BOS only a and b.
  const Tensor att = two_heads(
      {
          1.0f,
          0.0f,
          0.0f,
          0.0f,  //
          0.8f,
          0.2f,
          0.0f,
          0.0f,  // a: only itself left → 1
          0.4f,
          0.3f,
          0.3f,
          0.0f,  // b: 0.3, 0.3 → 0.5, 0.5
          0.1f,
          0.2f,
          0.3f,
          0.4f,
      },
      std::vector<float>(16, 0.0f));
  const WithoutSpecials w = drop_special_units(att, four_units(true));
  EXPECT_TRUE(w.units.causal);
  const std::vector<float> want = {1.0f, 0.0f, 0.5f, 0.5f};
  for (size_t i = 0; i < want.size(); ++i) EXPECT_NEAR(w.attention.data[i], want[i], 1e-6) << i;
  // The kept statistics see rows that sum to one again.
  const HeadStats s = compute_head_stats(w.attention.ptr(), 2, w.units);
  EXPECT_NEAR(s.max_attention, (1.0 + 0.5) / 2, 1e-9);
}

TEST(DropSpecialUnits, RejectsMismatchedShapes) {
  EXPECT_THROW(drop_special_units(Tensor({1, 1, 3, 3}), four_units(false)), Error);
}

}  // namespace
}  // namespace headscope::analysis
