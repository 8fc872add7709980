// SentencePiece vocabularies: the GGUF "llama" reader (tokenizer/gguf_vocab.h) on a tiny vocabulary
// written here, whose tokenizations are worked out by hand, and on Gemma 3's real 262,144 pieces; the
// Unigram model of tokenizer.json (tokenizer/unigram.h) on a tiny hand-made vocabulary and on ones
// trained by the `tokenizers` library. The library's and transformers' encodings of ~2,400 strings
// are written by tests/reference/golden_sentencepiece.py into $HEADSCOPE_GOLDENS/sentencepiece/.
#include <gtest/gtest.h>

#include "test_support.h"

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "headscope/error.h"
#include "headscope/tokenizer.h"
#include "io/gguf.h"
#include "tokenizer/bpe.h"
#include "tokenizer/gguf_vocab.h"

namespace {

namespace fs = std::filesystem;
using headscope::Encoding;
using headscope::Error;
using headscope::Tokenizer;
using headscope::testing::TempDir;

// ---- a GGUF file with only metadata (the layout of ggml's gguf.h: header, key/values) ----

std::string u32(uint32_t v) { return std::string(reinterpret_cast<const char*>(&v), 4); }
std::string u64(uint64_t v) { return std::string(reinterpret_cast<const char*>(&v), 8); }
std::string f32(float v) { return std::string(reinterpret_cast<const char*>(&v), 4); }
std::string str(const std::string& s) { return u64(s.size()) + s; }
constexpr uint32_t kUint32 = 4, kInt32 = 5, kFloat32 = 6, kBool = 7, kString = 8, kArray = 9;

struct Piece {
  std::string text;
  float score;
  int32_t type;  // 1 normal, 2 unknown, 3 control, 4 user-defined, 6 byte
};

// A vocabulary file: general.architecture `arch`, tokenizer.ggml.model "llama", the pieces, <unk>
// <s> </s> at ids 0 1 2, and `extra` key/values already encoded.
std::string spm_gguf(const std::string& arch, const std::vector<Piece>& pieces, const std::vector<std::string>& extra,
                     uint32_t bos_id = 1) {
  std::vector<std::string> kvs = {
      str("general.architecture") + u32(kString) + str(arch),
      str("tokenizer.ggml.model") + u32(kString) + str("llama"),
      str("tokenizer.ggml.bos_token_id") + u32(kUint32) + u32(bos_id),
      str("tokenizer.ggml.eos_token_id") + u32(kUint32) + u32(2),
      str("tokenizer.ggml.unknown_token_id") + u32(kUint32) + u32(0),
  };
  std::string tokens = str("tokenizer.ggml.tokens") + u32(kArray) + u32(kString) + u64(pieces.size());
  std::string scores = str("tokenizer.ggml.scores") + u32(kArray) + u32(kFloat32) + u64(pieces.size());
  std::string types = str("tokenizer.ggml.token_type") + u32(kArray) + u32(kInt32) + u64(pieces.size());
  for (const Piece& p : pieces) {
    tokens += str(p.text);
    scores += f32(p.score);
    types += u32(static_cast<uint32_t>(p.type));
  }
  kvs.insert(kvs.end(), {tokens, scores, types});
  kvs.insert(kvs.end(), extra.begin(), extra.end());
  std::string out = "GGUF" + u32(3) + u64(0) + u64(kvs.size());
  for (const std::string& kv : kvs) out += kv;
  out.resize((out.size() + 31) / 32 * 32, '\0');
  return out;
}

std::string kv_bool(const std::string& key, bool v) { return str(key) + u32(kBool) + std::string(1, v ? 1 : 0); }

std::unique_ptr<Tokenizer> load(const TempDir& dir, const std::string& bytes) {
  const std::string path = dir.file("vocab.gguf");
  std::ofstream(path, std::ios::binary) << bytes;
  return headscope::tokenizer::tokenizer_from_gguf(headscope::io::GgufFile(path));
}

// "id[begin,end)" for each token, to compare with a hand-written expectation.
std::string spans(const Encoding& e) {
  std::string s;
  for (const auto& t : e.tokens) {
    s += (s.empty() ? "" : " ") + std::to_string(t.id) + "[" + std::to_string(t.begin) + "," + std::to_string(t.end) +
         ")";
  }
  return s;
}

// Pieces: 3 "▁", 4-9 "a" "b" "c" "x" "y" "z", then merged pieces with their scores, then two byte
// pieces (é is C3 A9) and a control piece spelled like markup.
std::vector<Piece> tiny_pieces() {
  return {
      {"<unk>", 0, 2},       {"<s>", 0, 3},    {"</s>", 0, 3}, {"\u2581", -1, 1},                              // 0-3
      {"a", -1, 1},          {"b", -1, 1},     {"c", -1, 1},   {"x", -1, 1},      {"y", -1, 1}, {"z", -1, 1},  // 4-9
      {"\u2581a", -0.5f, 1},                                                                                   // 10
      {"bc", -2, 1},                                                                                           // 11
      {"ab", -3, 1},                                                                                           // 12
      {"ca", -2.5f, 1},                                                                                        // 13
      {"abc", -4, 1},                                                                                          // 14
      {"aa", -1.5f, 1},                                                                                        // 15
      {"xy", -2, 1},                            // 16: same score as "yz", listed first
      {"yz", -2, 1},                            // 17
      {"<0xC3>", 0, 6},      {"<0xA9>", 0, 6},  // 18, 19
      {"<tag>", 0, 3},                          // 20
  };
}

TEST(SentencePieceGguf, TinyVocabularyByHand) {
  TempDir dir;
  const auto tok = load(dir, spm_gguf("llama", tiny_pieces(), {kv_bool("tokenizer.ggml.add_space_prefix", false)}));
  const headscope::EncodeOptions plain{.add_special_tokens = false};
  // c a b c: "bc" (-2) beats "ca" (-2.5) and "ab" (-3) though it is rightmost; then c a bc -> "ca"
  // (-2.5) beats "abc" (-4).
  EXPECT_EQ(spans(tok->encode("cabc", plain)), "13[0,2) 11[2,4)");
  // Equal pairs: the leftmost merges first.
  EXPECT_EQ(spans(tok->encode("aaa", plain)), "15[0,2) 4[2,3)");
  // Different pieces of equal score: the one listed first in the file ("xy") merges first, wherever
  // it is in the text. (llama.cpp takes the leftmost here; transformers, our oracle, ranks equal
  // scores by file position. Gemma scores are all distinct.)
  EXPECT_EQ(spans(tok->encode("xyz", plain)), "16[0,2) 9[2,3)");
  EXPECT_EQ(spans(tok->encode("zxyz", plain)), "9[0,1) 16[1,3) 9[3,4)");
  // A space is "▁" (no prefix here); "▁b" is no piece.
  EXPECT_EQ(spans(tok->encode("a b", plain)), "4[0,1) 3[1,2) 5[2,3)");
  // Byte fallback: é is not a piece, its two bytes are; both tokens span the character.
  EXPECT_EQ(spans(tok->encode("é", plain)), "18[0,2) 19[0,2)");
  // 😀's bytes are not all pieces: the unknown piece, over the whole character.
  EXPECT_EQ(spans(tok->encode("a😀", plain)), "4[0,1) 0[1,5)");
  // Control pieces are matched whole in the text; BOS is added by default.
  EXPECT_EQ(spans(tok->encode("a<tag>b", {})), "1[0,0) 4[0,1) 20[1,6) 5[6,7)");
  EXPECT_EQ(tok->token_text(20), "<tag>");
}

TEST(SentencePieceGguf, SpacePrefixAndEos) {
  TempDir dir;
  const auto tok = load(
      dir, spm_gguf("llama", tiny_pieces(),
                    {kv_bool("tokenizer.ggml.add_eos_token", true), kv_bool("tokenizer.ggml.add_bos_token", false)}));
  // "abc" is read as "▁abc": "▁a" (-0.5) first, then "bc"; the prefix "▁" maps to the first character.
  EXPECT_EQ(spans(tok->encode("abc", {})), "10[0,1) 11[1,3) 2[0,0)");
}

TEST(SentencePieceGguf, GemmaRespellsBlankPiecesAndHasNoPrefix) {
  std::vector<Piece> pieces = tiny_pieces();
  pieces.push_back({"  ", -0.1f, 4});  // 21: Gemma stores "▁▁" with spaces, as user-defined
  TempDir dir;
  const auto tok = load(dir, spm_gguf("gemma3", pieces, {}));
  // The blank piece is looked up as "▁▁", and Gemma merges by file position: "▁a" (10) before "▁▁" (21).
  EXPECT_EQ(spans(tok->encode("  a", {.add_special_tokens = false})), "3[0,1) 10[1,3)");
  EXPECT_EQ(spans(tok->encode(" x  y", {.add_special_tokens = false})), "3[0,1) 7[1,2) 21[2,4) 8[4,5)");
  EXPECT_EQ(tok->token_text(21), "\u2581\u2581");
  // Gemma's decoder has no Strip step: a leading space comes back (generated text starts with it).
  std::vector<int32_t> ids;
  for (const auto& t : tok->encode(" x  y", {.add_special_tokens = false}).tokens) ids.push_back(t.id);
  EXPECT_EQ(tok->decode(ids), " x  y");
}

TEST(SentencePieceGguf, BadVocabulariesAreErrors) {
  TempDir dir;
  std::vector<Piece> pieces = tiny_pieces();
  headscope::testing::expect_error([&] { load(dir, spm_gguf("llama", pieces, {}, 999)); },
                                   {"tokenizer.ggml.bos_token_id", "999"});  // a special id outside the vocabulary
  pieces[5].text = "\xff";
  EXPECT_THROW(load(dir, spm_gguf("llama", pieces, {})), Error);  // a piece that is not UTF-8
}

// ---- goldens ----

fs::path goldens() { return headscope::testing::goldens_dir("sentencepiece"); }

nlohmann::json read_json(const fs::path& path) {
  std::ifstream in(path);
  if (!in) {
    ADD_FAILURE() << "missing golden " << path << "; run `make goldens`";
    return nlohmann::json::array();
  }
  return nlohmann::json::parse(in);
}

// Encodes every golden string with the default special tokens and counts the strings whose ids,
// byte offsets and word indices agree with the oracle.
void check_cases(const std::string& name, const Tokenizer& tok) {
  const nlohmann::json cases = read_json(goldens() / name / "cases.json");
  ASSERT_GE(cases.size(), 2000u) << name;
  size_t same_ids = 0, same_offsets = 0, same_words = 0, reported = 0;
  for (const nlohmann::json& c : cases) {
    const std::string text = c.at("text").get<std::string>();
    const Encoding enc = tok.encode(text, {});
    const auto ids = c.at("ids").get<std::vector<int32_t>>();
    const auto offsets = c.at("offsets").get<std::vector<std::vector<int64_t>>>();
    const auto words = c.at("words").get<std::vector<int32_t>>();
    const bool ids_ok = enc.ids() == ids;
    bool offsets_ok = ids_ok, words_ok = ids_ok;
    for (size_t i = 0; ids_ok && i < ids.size(); ++i) {
      offsets_ok = offsets_ok && enc.tokens[i].begin == offsets[i][0] && enc.tokens[i].end == offsets[i][1];
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
        ours += std::to_string(t.id) + "[" + std::to_string(t.begin) + "," + std::to_string(t.end) + ")w" +
                std::to_string(t.word) + " ";
      }
      ADD_FAILURE() << name << " differs on " << nlohmann::json(text).dump() << "\n  ours:     " << ours
                    << "\n  expected: " << expected;
    }
  }
  std::printf("[ sentencepiece ] %-14s ids equal %zu/%zu, offsets equal %zu/%zu, word indices %zu/%zu\n", name.c_str(),
              same_ids, cases.size(), same_offsets, cases.size(), same_words, cases.size());
  EXPECT_EQ(same_ids, cases.size());
  EXPECT_EQ(same_offsets, cases.size());
  EXPECT_EQ(same_words, cases.size());
}

TEST(SentencePieceGguf, Gemma3RealVocabularyAgreesWithTransformers) {
  const fs::path file = fs::path(HEADSCOPE_SOURCE_DIR) / "models" / "gemma-3-270m" / "gemma-3-270m-q4_k_m.gguf";
  if (!fs::exists(file)) GTEST_SKIP() << file << " is not on disk (make setup fetches it)";
  const auto t0 = std::chrono::steady_clock::now();
  const headscope::io::GgufFile gguf(file.string());
  const auto tok = headscope::tokenizer::tokenizer_from_gguf(gguf);
  const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  std::printf("[ sentencepiece ] gemma3 vocabulary (%d pieces) loaded in %.0f ms\n", tok->vocab_size(), ms);
  EXPECT_EQ(tok->vocab_size(), 262144);
  check_cases("gemma3", *tok);
}

TEST(SentencePieceJson, ADecoderWithoutStripKeepsTheFirstSpace) {
  using headscope::tokenizer::decode_style_of;
  using headscope::tokenizer::DecodeStyle;
  const nlohmann::json replace = {{"type", "Replace"}, {"pattern", {{"String", "\u2581"}}}, {"content", " "}};
  const nlohmann::json gemma = {{"type", "Sequence"},
                                {"decoders", {replace, {{"type", "ByteFallback"}}, {{"type", "Fuse"}}}}};
  nlohmann::json llama2 = gemma;
  llama2["decoders"].push_back({{"type", "Strip"}, {"content", " "}, {"start", 1}, {"stop", 0}});
  EXPECT_EQ(decode_style_of(gemma), DecodeStyle::kSentencePieceKeepSpace);
  EXPECT_EQ(decode_style_of(llama2), DecodeStyle::kSentencePiece);
  const std::vector<std::string> pieces = {"\u2581a", "\u2581b", "<0x21>"};
  EXPECT_EQ(headscope::tokenizer::decode_token_texts(DecodeStyle::kSentencePieceKeepSpace, pieces), " a b!");
  EXPECT_EQ(headscope::tokenizer::decode_token_texts(DecodeStyle::kSentencePiece, pieces), "a b!");
}

// ---- Unigram (tokenizer.json) ----

// The example of the library's documentation (tokenizers/src/models/unigram/model.rs, encode):
// "abcdacdxx" is best cut as abcd (10) + a (0) + cd (1) + the two unknown x fused into one token.
std::string unigram_json(bool byte_fallback, const std::string& normalizer = "null") {
  std::string vocab = R"([["<unk>", 0], ["a", 0], ["b", 0], ["c", 0], ["d", 0], ["cd", 1], ["ab", 2], ["abc", 5],
                          ["abcd", 10], ["<0x78>", -3]])";
  return R"({"model": {"type": "Unigram", "unk_id": 0, "byte_fallback": )" +
         std::string(byte_fallback ? "true" : "false") + R"(, "vocab": )" + vocab + R"(}, "normalizer": )" +
         normalizer + "}";
}

TEST(Unigram, ViterbiByHand) {
  const auto tok = Tokenizer::from_json_string(unigram_json(false), "tiny");
  EXPECT_EQ(spans(tok->encode("abcdacdxx", {})), "8[0,4) 1[4,5) 5[5,7) 0[7,9)");
  // The highest total: "abd" = ab (2) + d (0) beats a + b + d (0).
  EXPECT_EQ(spans(tok->encode("abd", {})), "6[0,2) 4[2,3)");
  // A character no piece covers is the unknown piece (score: the lowest, -3, minus 10); offsets
  // are bytes of the original text.
  EXPECT_EQ(spans(tok->encode("éab", {})), "0[0,2) 6[2,4)");
}

TEST(Unigram, ByteFallbackSpansTheFusedRun) {
  const auto tok = Tokenizer::from_json_string(unigram_json(true), "tiny");
  // "xx" is one fused unknown run; both its bytes are pieces (<0x78>), each spanning the run.
  EXPECT_EQ(spans(tok->encode("axx", {})), "1[0,1) 9[1,3) 9[1,3)");
  // "é" has no byte pieces: the unknown piece.
  EXPECT_EQ(spans(tok->encode("é", {})), "0[0,2)");
}

TEST(Unigram, UnsupportedAndBadFilesAreErrors) {
  // A Precompiled normalizer with an empty charsmap (tests/unit/precompiled_test.cc has the rest).
  headscope::testing::expect_error(
      [] {
        Tokenizer::from_json_string(unigram_json(false, R"({"type": "Precompiled", "precompiled_charsmap": ""})"),
                                    "t5");
      },
      {"t5", "precompiled_charsmap"});
  headscope::testing::expect_error(
      [] { Tokenizer::from_json_string(R"({"model": {"type": "Unigram", "unk_id": 5, "vocab": [["a", 0]]}})", "bad"); },
      {"bad", "unk_id"});
  headscope::testing::expect_error(
      [] { Tokenizer::from_json_string(R"({"model": {"type": "Unigram", "vocab": [["a", "x"]]}})", "bad"); },
      {"bad", "[piece, score]"});
  const std::string long_piece(2000, 'a');
  headscope::testing::expect_error(
      [&] {
        Tokenizer::from_json_string(R"({"model": {"type": "Unigram", "vocab": [[")" + long_piece + R"(", 0]]}})",
                                    "long");
      },
      {"long", "bytes long"});
  // No unknown piece and a character no piece covers: an error, not a wrong answer.
  const auto no_unk = Tokenizer::from_json_string(R"({"model": {"type": "Unigram", "vocab": [["a", 0]]}})", "nounk");
  EXPECT_THROW(no_unk->encode("ab", {}), Error);
}

TEST(Unigram, TrainedVocabulariesAgreeWithTokenizers) {
  for (const std::string name : {"unigram", "unigram_bytes"}) {
    const auto tok = Tokenizer::from_tokenizer_json((goldens() / name / "tokenizer.json").string());
    check_cases(name, *tok);
  }
}

}  // namespace
