// BPE tokenizers against the Hugging Face `tokenizers` library: ids, offsets and word indices
// on ~2,300 strings per tokenizer (tests/reference/golden_bpe.py writes the tokenizers and the
// library's encodings into $HEADSCOPE_GOLDENS/bpe/<name>/).
#include <gtest/gtest.h>

#include "test_support.h"

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>

#include "headscope/error.h"
#include "headscope/tokenizer.h"
#include "tokenizer/bpe.h"
#include "tokenizer/pre_tokenizers.h"

namespace {

namespace fs = std::filesystem;
using headscope::Tokenizer;

fs::path goldens() { return headscope::testing::goldens_dir("bpe"); }

nlohmann::json read_json(const fs::path& path) {
  std::ifstream in(path);
  if (!in) {
    ADD_FAILURE() << "missing golden " << path << "; run `make goldens`";
    return nlohmann::json::array();
  }
  return nlohmann::json::parse(in);
}

// tokenizers' Python API reports character offsets: the byte offsets of each split are mapped to
// characters (a byte inside a character counts as that character, the end of the text as the
// number of characters) before the post-processor trims ByteLevel offsets, so its trimming counts
// characters. Ours are bytes throughout. Spaces are one byte and one character, so mapping our
// trimmed byte offsets the same way gives the library's numbers; that is what we compare.
struct CharOffsets {
  std::vector<int64_t> char_of_byte;  // [bytes + 1]
  explicit CharOffsets(const std::string& text) {
    int64_t chars = 0;
    for (unsigned char c : text) {
      if ((c & 0xC0) != 0x80) ++chars;  // not a continuation byte: a new character starts
      char_of_byte.push_back(chars - 1);
    }
    char_of_byte.push_back(chars);
  }
  std::pair<int64_t, int64_t> convert(int64_t begin, int64_t end) const {
    return {char_of_byte.at(static_cast<size_t>(begin)), char_of_byte.at(static_cast<size_t>(end))};
  }
};

// Encodes every golden string with add_special_tokens (the library's default) and counts the
// strings whose ids, offsets and word indices all agree.
void check_tokenizer(const std::string& name) {
  const fs::path dir = goldens() / name;
  const nlohmann::json cases = read_json(dir / "cases.json");
  ASSERT_GE(cases.size(), 2000u) << name;
  std::unique_ptr<Tokenizer> tok = Tokenizer::from_tokenizer_json((dir / "tokenizer.json").string());
  size_t same_ids = 0, same_offsets = 0, same_words = 0, reported = 0;
  for (const nlohmann::json& c : cases) {
    const std::string text = c.at("text").get<std::string>();
    const headscope::Encoding enc = tok->encode(text, {});
    const auto ids = c.at("ids").get<std::vector<int32_t>>();
    const auto offsets = c.at("offsets").get<std::vector<std::vector<int64_t>>>();
    const auto words = c.at("words").get<std::vector<int32_t>>();
    const bool ids_ok = enc.ids() == ids;
    bool offsets_ok = ids_ok, words_ok = ids_ok;
    const CharOffsets to_chars(text);
    for (size_t i = 0; ids_ok && i < ids.size(); ++i) {
      const auto [b, e] = to_chars.convert(enc.tokens[i].begin, enc.tokens[i].end);
      offsets_ok = offsets_ok && b == offsets[i][0] && e == offsets[i][1];
      words_ok = words_ok && enc.tokens[i].word == words[i];
    }
    same_ids += ids_ok;
    same_offsets += offsets_ok;
    same_words += words_ok;
    if ((!ids_ok || !offsets_ok || !words_ok) && reported++ < 5) {
      std::string expected;
      for (size_t i = 0; i < ids.size(); ++i) {
        expected += std::to_string(ids[i]) + "[" + std::to_string(offsets[i][0]) + "," + std::to_string(offsets[i][1]) +
                    ")w" + std::to_string(words[i]) + " ";
      }
      std::string ours;
      for (const auto& t : enc.tokens) {
        const auto [b, e] = to_chars.convert(t.begin, t.end);
        ours += std::to_string(t.id) + "[" + std::to_string(b) + "," + std::to_string(e) + ")w" +
                std::to_string(t.word) + " ";
      }
      ADD_FAILURE() << name << " differs on " << nlohmann::json(text).dump() << "\n  ours:     " << ours
                    << "\n  expected: " << expected;
    }
  }
  std::printf("[ bpe ] %-14s ids %zu/%zu, offsets %zu/%zu, word indices %zu/%zu\n", name.c_str(), same_ids,
              cases.size(), same_offsets, cases.size(), same_words, cases.size());
  EXPECT_EQ(same_ids, cases.size());
  EXPECT_EQ(same_offsets, cases.size());
  EXPECT_EQ(same_words, cases.size());
}

TEST(BpeTokenizer, Gpt2ByteLevel) { check_tokenizer("gpt2"); }
TEST(BpeTokenizer, Gpt2AddPrefixSpaceAndTemplate) { check_tokenizer("gpt2_prefix"); }
TEST(BpeTokenizer, Llama3SplitAndIgnoreMerges) { check_tokenizer("llama3"); }
TEST(BpeTokenizer, SmolLMDigitsThenByteLevel) { check_tokenizer("smollm"); }
TEST(BpeTokenizer, SentencePieceMetaspaceByteFallback) { check_tokenizer("spm_metaspace"); }
TEST(BpeTokenizer, SentencePieceLegacyNormalizer) { check_tokenizer("spm_legacy"); }
TEST(BpeTokenizer, SmolLM2RealVocabulary) { check_tokenizer("smollm2"); }

// The byte ↔ character table is a bijection that fixes the printable bytes (GPT-2 encoder.py).
TEST(BpeTokenizer, ByteLevelAlphabet) {
  using headscope::tokenizer::byte_to_char;
  using headscope::tokenizer::char_to_byte;
  EXPECT_EQ(byte_to_char(' '), U'\u0120');   // Ġ
  EXPECT_EQ(byte_to_char('\n'), U'\u010A');  // Ċ
  EXPECT_EQ(byte_to_char('A'), U'A');
  EXPECT_EQ(byte_to_char(0xAD), U'\u0143');  // the soft hyphen is not printable: Ń
  for (int b = 0; b < 256; ++b) EXPECT_EQ(char_to_byte(byte_to_char(static_cast<uint8_t>(b))), b);
}

// Decoding reverses byte-level and SentencePiece spellings; through the public API, decoding the
// ids of a text gives the text back.
TEST(BpeTokenizer, Decode) {
  using headscope::tokenizer::decode_token_texts;
  using headscope::tokenizer::DecodeStyle;
  EXPECT_EQ(decode_token_texts(DecodeStyle::kByteLevel, {"Hello", "\xC4\xA0world", "\xC4\x8A"}), "Hello world\n");
  EXPECT_EQ(decode_token_texts(DecodeStyle::kSentencePiece,
                               {"\xE2\x96\x81Hello", "\xE2\x96\x81world", "<0x0A>", "<0xE2>", "<0x82>", "<0xAC>"}),
            "Hello world\n\xE2\x82\xAC");
  headscope::EncodeOptions plain;
  plain.add_special_tokens = false;
  const std::string text = "Les élèves d'été, 2024 — 東京 😀!";
  for (const char* name : {"gpt2", "llama3", "spm_metaspace", "smollm2"}) {
    auto tok = Tokenizer::from_tokenizer_json((goldens() / name / "tokenizer.json").string());
    EXPECT_EQ(tok->decode(tok->encode(text, plain).ids()), text) << name;
  }
}

// Found by review: ByteLevel offset trimming counted the characters before each token that ends in
// spaces from the start of the text, quadratic in a text of many such tokens (600 KB took minutes).
TEST(BpeTokenizer, ManySpaceTokensStayLinear) {
  std::unique_ptr<Tokenizer> tok = Tokenizer::from_tokenizer_json((goldens() / "gpt2" / "tokenizer.json").string());
  const size_t per_unit = tok->encode("  a", {}).size();
  ASSERT_GT(per_unit, 0u);
  std::string text;
  for (int i = 0; i < 200000; ++i) text += "  a";
  const headscope::Encoding e = tok->encode(text, {});
  EXPECT_EQ(e.size(), 200000 * per_unit);
  EXPECT_EQ(e.tokens.back().end, static_cast<int64_t>(text.size()));
}

TEST(BpeTokenizer, BadInputIsAnError) {
  const fs::path dir = goldens() / "gpt2";
  std::unique_ptr<Tokenizer> tok = Tokenizer::from_tokenizer_json((dir / "tokenizer.json").string());
  EXPECT_THROW(tok->encode("abc\xFF", {}), headscope::Error);
  headscope::EncodeOptions limited;
  limited.max_length = 3;
  EXPECT_THROW(tok->encode("one two three four five", limited), headscope::Error);
  limited.truncate = true;
  const headscope::Encoding e = tok->encode("one two three four five", limited);
  EXPECT_EQ(e.size(), 3u);
  EXPECT_TRUE(e.truncated);
}

}  // namespace
