// Prompt pairs for patching (src/circuits/datasets.cc) on the real decoders' tokenizers: every pair
// is re-tokenised here and its structure checked from the token ids, independently of the
// generator's own check; the generators are deterministic in their seed; bad pairs are refused.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <string>

#include "headscope/circuits.h"
#include "headscope/error.h"
#include "headscope/model.h"
#include "test_support.h"

namespace headscope {
namespace {

namespace fs = std::filesystem;

// SmolLM2 (byte-level BPE) and Gemma 3 (SentencePiece), found through their goldens' manifests.
const Model& decoder(const std::string& golden) {
  static std::map<std::string, std::unique_ptr<Model>> loaded;
  auto& m = loaded[golden];
  if (!m) {
    std::ifstream in(headscope::testing::goldens_dir("decoders") / golden / "golden" / "manifest.json");
    if (!in) throw std::runtime_error("missing " + golden + " goldens: run `make goldens`");
    m = Model::load(nlohmann::json::parse(in).at("gguf").get<std::string>());
  }
  return *m;
}

std::vector<int32_t> ids(const Model& model, const std::string& text) { return model.encode(text).ids(); }

int count(const std::string& text, const std::string& word) {
  int n = 0;
  for (size_t at = text.find(word); at != std::string::npos; at = text.find(word, at + 1)) ++n;
  return n;
}

// The message of the Error `f` throws (a test failure when it throws none).
template <typename F>
std::string error_of(F&& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  ADD_FAILURE() << "no error";
  return "";
}

class PromptPairsOn : public ::testing::TestWithParam<std::string> {};

TEST_P(PromptPairsOn, IoiPairsAreBalancedAndAlignedTokenForToken) {
  const Model& model = decoder(GetParam());
  const PromptPairs set = make_ioi_pairs(model, 100, 7);
  ASSERT_EQ(set.pairs.size(), 100u);
  int abba = 0;
  for (const PromptPair& p : set.pairs) {
    abba += p.variant == "ABBA";
    const auto clean = ids(model, p.clean), corrupt = ids(model, p.corrupt);
    ASSERT_EQ(clean.size(), corrupt.size()) << p.clean << " / " << p.corrupt;
    // The corruption changes the three name positions and nothing else.
    int changed = 0;
    for (size_t i = 0; i < clean.size(); ++i) changed += clean[i] != corrupt[i];
    EXPECT_EQ(changed, 3) << p.clean << " / " << p.corrupt;
    // The indirect object is named once, the subject twice; the corrupted prompt names neither.
    const std::string io = p.answer.substr(1), s = p.wrong.substr(1);
    EXPECT_NE(io, s);
    EXPECT_EQ(count(p.clean, io), 1) << p.clean;
    EXPECT_EQ(count(p.clean, s), 2) << p.clean;
    EXPECT_EQ(count(p.corrupt, io) + count(p.corrupt, s), 0) << p.corrupt;
    // ABBA: the subject is the second name introduced; BABA: the first.
    EXPECT_EQ(p.clean.find(s) > p.clean.find(io), p.variant == "ABBA") << p.clean;
    // The answers are the tokens the clean prompt continues with.
    EXPECT_EQ(ids(model, p.clean + p.answer).back(), p.answer_id);
    EXPECT_EQ(ids(model, p.clean + p.wrong).back(), p.wrong_id);
    EXPECT_EQ(p.n_tokens, static_cast<int64_t>(clean.size()));
  }
  EXPECT_EQ(abba, 50);
  // The seed decides everything: the same seed gives the same file, another seed another one.
  EXPECT_EQ(prompt_pairs_to_json(make_ioi_pairs(model, 100, 7)), prompt_pairs_to_json(set));
  EXPECT_NE(prompt_pairs_to_json(make_ioi_pairs(model, 100, 8)), prompt_pairs_to_json(set));
}

TEST_P(PromptPairsOn, InductionRepeatsTheFirstHalfAndAnswersItsNextToken) {
  const Model& model = decoder(GetParam());
  constexpr int kLength = 12;
  const PromptPairs set = make_induction_pairs(model, 20, kLength, 3);
  for (const PromptPair& p : set.pairs) {
    const auto clean = ids(model, p.clean), corrupt = ids(model, p.corrupt);
    ASSERT_EQ(clean.size(), corrupt.size());
    const Encoding encoding = model.encode(p.clean);
    size_t start = 0;  // after the specials the model puts in front (Gemma's <bos>)
    while (start < encoding.size() && encoding.tokens[start].special) ++start;
    ASSERT_EQ(clean.size(), start + 2 * kLength - 1) << "each word one token";
    for (int j = 0; j + 1 < kLength; ++j) {
      EXPECT_EQ(clean[start + kLength + j], clean[start + j]);    // the second half repeats the first
      EXPECT_NE(corrupt[start + kLength + j], clean[start + j]);  // the corrupted one does not
      EXPECT_EQ(corrupt[start + j], clean[start + j]);            // the first half is shared
    }
    EXPECT_EQ(p.answer_id, clean[start + kLength - 1]);  // the token that followed in the first half
    EXPECT_NE(p.wrong_id, p.answer_id);
  }
}

TEST_P(PromptPairsOn, GreaterThanAnswersTheNextTensDigit) {
  const Model& model = decoder(GetParam());
  const PromptPairs set = make_greater_than_pairs(model, 40, 5);
  for (const PromptPair& p : set.pairs) {
    const std::string year = p.clean.substr(p.clean.find("year 17") + 7, 2);
    const int tens = year[0] - '0';
    EXPECT_EQ(p.answer, std::to_string(tens + 1));
    EXPECT_EQ(p.wrong, std::to_string(tens - 1));
    EXPECT_NE(p.corrupt.find("year 170"), std::string::npos);
    EXPECT_EQ(ids(model, p.clean).size(), ids(model, p.corrupt).size());
  }
}

INSTANTIATE_TEST_SUITE_P(Decoders, PromptPairsOn, ::testing::Values("smollm2", "gemma3_270m"));

TEST(PromptPairs, GreaterThanIsRefusedWhereNumbersAreNotDigitTokens) {
  // MiniLM: WordPiece keeps "1732" whole.
  const std::string error = error_of([&] { make_greater_than_pairs(headscope::testing::default_model(), 4, 1); });
  EXPECT_NE(error.find("one digit per token"), std::string::npos) << error;
}

TEST(PromptPairs, UnequalLengthsAndMultiTokenAnswersAreRefused) {
  const Model& model = decoder("smollm2");
  PromptPairs set{
      "custom",
      0,
      "",
      {{"When Mary and John went out, John gave a book to",
        "When Mary and Bartholomew-Smith went out, Bartholomew-Smith gave a book to", " Mary", " John", ""}}};
  const std::string unequal = error_of([&] { check_pairs(model, set); });
  EXPECT_NE(unequal.find("same number of tokens"), std::string::npos) << unequal;
  set.pairs[0].corrupt = "When Anna and Paul went out, Paul gave a book to";
  set.pairs[0].answer = " Mary Poppins";
  const std::string several = error_of([&] { check_pairs(model, set); });
  EXPECT_NE(several.find("must be one token"), std::string::npos) << several;
  set.pairs[0].answer = " Mary";
  EXPECT_NO_THROW(check_pairs(model, set));
}

TEST(PromptPairs, JsonRoundTripsAndRefusesWhatItDoesNotKnow) {
  const Model& model = decoder("smollm2");
  const PromptPairs set = make_ioi_pairs(model, 6, 11);
  PromptPairs back = prompt_pairs_from_json(prompt_pairs_to_json(set), "pairs.json");
  check_pairs(model, back);
  EXPECT_EQ(prompt_pairs_to_json(back), prompt_pairs_to_json(set));
  for (const char* bad :
       {"[", "{}", "{\"pairs\": []}", "{\"pairs\": [{\"clean\": \"a\"}]}",
        "{\"pairs\": [{\"clean\": \"a\", \"corrupt\": \"b\", \"answer\": \"c\", \"wrong\": \"d\", \"x\": \"\"}]}",
        "{\"pairs\": [{\"clean\": 1}]}", "{\"pairs\": [], \"extra\": 1}"}) {
    EXPECT_THROW(prompt_pairs_from_json(bad, "pairs.json"), Error) << bad;
  }
}

}  // namespace
}  // namespace headscope
