// The Precompiled normalizer (tokenizer/precompiled.h): a SentencePiece charsmap built here as a
// double array by hand, whose rewrites are worked out by hand; damaged charsmaps; and the real
// nmt_nfkc and nfkc_cf charsmaps of models trained by the `sentencepiece` library, against the
// `tokenizers` library's ids, offsets and normalized strings on ~2,500 strings each, written by
// tests/reference/golden_precompiled.py into $HEADSCOPE_GOLDENS/sentencepiece/precompiled_*.
#include <gtest/gtest.h>

#include "test_support.h"

#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "headscope/error.h"
#include "headscope/tokenizer.h"
#include "tokenizer/normalized_string.h"
#include "tokenizer/normalizers.h"
#include "tokenizer/precompiled.h"
#include "tokenizer/unicode.h"

namespace {

namespace fs = std::filesystem;
using headscope::Encoding;
using headscope::Error;
using headscope::Tokenizer;
namespace tk = headscope::tokenizer;

// ---- a charsmap built by hand: a darts-clone double array over the keys' UTF-8 bytes ----

// Places each trie node so that its children sit at node ^ offset ^ byte (and its value, when it
// has one, at node ^ offset), trying offsets upward until every slot is free. Units as darts-clone
// writes them: label in bits 0-7, has-leaf in bit 8, offset from bit 10; a value unit has bit 31.
std::string build_charsmap(const std::map<std::string, std::string>& rules) {
  struct Node {
    std::map<unsigned char, int> children;
    int value = -1;  // byte offset of the replacement, or -1
  };
  std::vector<Node> nodes(1);
  std::string normalized;
  for (const auto& [key, replacement] : rules) {
    int n = 0;
    for (unsigned char c : key) {
      auto it = nodes[n].children.find(c);
      if (it == nodes[n].children.end()) {
        nodes.push_back({});
        it = nodes[n].children.emplace(c, static_cast<int>(nodes.size()) - 1).first;
      }
      n = it->second;
    }
    nodes[n].value = static_cast<int>(normalized.size());
    normalized += replacement + '\0';
  }
  std::vector<uint32_t> units(1, 0);
  std::vector<bool> used(1, true);
  const auto ensure = [&](size_t pos) {
    if (pos >= units.size()) units.resize(pos + 1, 0), used.resize(pos + 1, false);
  };
  std::vector<std::pair<int, size_t>> todo{{0, 0}};  // (node, position)
  while (!todo.empty()) {
    const auto [n, pos] = todo.back();
    todo.pop_back();
    const Node& node = nodes[static_cast<size_t>(n)];
    size_t offset = 1;
    const auto fits = [&, pos = pos](size_t o) {  // clang 14 cannot capture a binding
      if (node.value >= 0 && (pos ^ o) < used.size() && used[pos ^ o]) return false;
      for (const auto& [c, child] : node.children) {
        if ((pos ^ o ^ c) < used.size() && used[pos ^ o ^ c]) return false;
      }
      return true;
    };
    while (!fits(offset)) ++offset;
    units[pos] |= static_cast<uint32_t>(offset << 10) | (node.value >= 0 ? 1u << 8 : 0u);
    if (node.value >= 0) {
      ensure(pos ^ offset);
      used[pos ^ offset] = true;
      units[pos ^ offset] = (1u << 31) | static_cast<uint32_t>(node.value);
    }
    for (const auto& [c, child] : node.children) {
      const size_t at = pos ^ offset ^ c;
      ensure(at);
      used[at] = true;
      units[at] = c;
      todo.push_back({child, at});
    }
  }
  std::string blob;
  const auto put = [&](uint32_t v) {
    for (int b = 0; b < 4; ++b) blob.push_back(static_cast<char>((v >> (8 * b)) & 0xFF));
  };
  put(static_cast<uint32_t>(units.size() * 4));
  for (uint32_t u : units) put(u);
  return blob + normalized;
}

std::string base64(const std::string& bytes) {
  static const char* kAlphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  std::string out;
  for (size_t i = 0; i < bytes.size(); i += 3) {
    uint32_t g = 0;
    for (size_t k = 0; k < 3; ++k)
      g = (g << 8) | (i + k < bytes.size() ? static_cast<unsigned char>(bytes[i + k]) : 0u);
    const size_t n = std::min<size_t>(3, bytes.size() - i);
    for (size_t k = 0; k < 4; ++k) out.push_back(k <= n ? kAlphabet[(g >> (18 - 6 * k)) & 63] : '=');
  }
  return out;
}

// The rules of the hand-made charsmap: a fullwidth letter, a ligature that grows, a composition
// of two characters into one, a zero-width space that disappears, and "e" inside a longer key.
const std::map<std::string, std::string> kRules = {
    {"\uFF21", "A"}, {"\uFB01", "fi"}, {"e\u0301", "\u00E9"}, {"\u200B", ""}, {"\u2460", "1"},
};

// Normalizes `text` with `charsmap`; returns the text and each character's original byte span.
std::string normalize(const std::string& charsmap, const std::string& text) {
  const tk::PrecompiledNormalizer n(tk::PrecompiledCharsmap(charsmap, "hand"));
  const auto decoded = headscope::unicode::decode_utf8(text);
  tk::NormalizedString s(decoded, 0, decoded.chars.size());
  n.normalize(s);
  std::string out = s.utf8() + " |";
  for (size_t i = 0; i < s.size(); ++i) {
    out += " " + std::to_string(s.alignment(i).begin) + "-" + std::to_string(s.alignment(i).end);
  }
  return out;
}

TEST(Precompiled, Base64DecodesAndRejects) {
  EXPECT_EQ(tk::decode_base64("", "t"), "");
  EXPECT_EQ(tk::decode_base64("TWFu", "t"), "Man");
  EXPECT_EQ(tk::decode_base64("TWE=", "t"), "Ma");
  EXPECT_EQ(tk::decode_base64("TQ==", "t"), "M");
  EXPECT_EQ(tk::decode_base64(base64(std::string("\0\xff\x10", 3)), "t"), std::string("\0\xff\x10", 3));
  headscope::testing::expect_error([] { tk::decode_base64("TWF", "t5"); }, {"t5", "multiple of 4"});
  headscope::testing::expect_error([] { tk::decode_base64("TW=u", "t5"); }, {"t5", "offset 2"});
  headscope::testing::expect_error([] { tk::decode_base64("TQ==TWFu", "t5"); }, {"t5", "offset 2"});
}

TEST(Precompiled, HandMadeCharsmapRewritesAndAligns) {
  const std::string map = build_charsmap(kRules);
  // Unmatched text is untouched, one original byte span per character.
  EXPECT_EQ(normalize(map, "ab"), "ab | 0-1 1-2");
  // Fullwidth Ａ (3 bytes) becomes A, aligned to its 3 bytes.
  EXPECT_EQ(normalize(map, "x\uFF21"), "xA | 0-1 1-4");
  // ﬁ grows to "fi": the "i" is an insertion, aligned to the same 3 bytes.
  EXPECT_EQ(normalize(map, "\uFB01x"), "fix | 0-3 0-3 3-4");
  // e + combining acute is one cluster of 3 bytes, replaced whole by é. As in the library, é
  // replaces the first old character and the mark is dropped after it: é keeps only e's span.
  EXPECT_EQ(normalize(map, "e\u0301!"), "\u00E9! | 0-1 3-4");
  // The zero-width space vanishes; the character before it absorbs its bytes' removal.
  EXPECT_EQ(normalize(map, "a\u200Bb"), "ab | 0-1 4-5");
  // ...but at the very start the library records no removal, so the next character takes the
  // removed one's span: the quirk of precompiled.rs, kept for identical offsets.
  EXPECT_EQ(normalize(map, "\u200Bb"), "b | 0-3");
  // A cluster shorter than 6 bytes is replaced by its SHORTEST matching prefix's replacement:
  // Ａ + combining acute (5 bytes) becomes "A" and the mark is gone.
  EXPECT_EQ(normalize(map, "\uFF21\u0301"), "A | 0-3");
  // From 6 bytes on, each character is looked up alone: ① + two acute marks (7 bytes).
  EXPECT_EQ(normalize(map, "\u2460\u0301\u0301"), "1\u0301\u0301 | 0-3 3-5 5-7");
  // A NUL byte ends a key: never matched.
  EXPECT_EQ(normalize(map, std::string("\0", 1)), std::string("\0", 1) + " | 0-1");
}

TEST(Precompiled, TokenizerJsonWithHandMadeCharsmap) {
  const std::string json =
      R"({"model": {"type": "Unigram", "unk_id": 0, "vocab": [["<unk>", 0], ["A", -1], ["f", -2], ["i", -2], ["fi", -1]]},
          "normalizer": {"type": "Precompiled", "precompiled_charsmap": ")" +
      base64(build_charsmap(kRules)) + R"("}})";
  const auto tok = Tokenizer::from_json_string(json, "hand");
  const Encoding enc = tok->encode("\uFF21\uFB01", {});
  ASSERT_EQ(enc.tokens.size(), 2u);
  EXPECT_EQ(enc.tokens[0].id, 1);  // A, from Ａ at bytes [0, 3)
  EXPECT_EQ(enc.tokens[0].begin, 0);
  EXPECT_EQ(enc.tokens[0].end, 3);
  EXPECT_EQ(enc.tokens[1].id, 4);  // fi, from ﬁ at bytes [3, 6)
  EXPECT_EQ(enc.tokens[1].begin, 3);
  EXPECT_EQ(enc.tokens[1].end, 6);
}

TEST(Precompiled, DamagedCharsmapsAreErrors) {
  using headscope::testing::expect_error;
  const std::string good = build_charsmap(kRules);
  const auto u32 = [](uint32_t v) { return std::string(reinterpret_cast<const char*>(&v), 4); };
  const auto load = [](const std::string& blob) { return tk::PrecompiledCharsmap(blob, "t5.json"); };
  const auto json = [](const std::string& charsmap) {
    return R"({"model": {"type": "Unigram", "unk_id": 0, "vocab": [["<unk>", 0]]}, "normalizer": {"type": "Precompiled", "precompiled_charsmap": )" +
           charsmap + "}}";
  };
  // Missing, not a string, not base64, empty (what some converted T5 files carry).
  expect_error([&] { Tokenizer::from_json_string(json("null"), "t5.json"); }, {"t5.json", "precompiled_charsmap"});
  expect_error([&] { Tokenizer::from_json_string(json("\"@@@@\""), "t5.json"); }, {"t5.json", "base64"});
  expect_error([&] { Tokenizer::from_json_string(json("\"\""), "t5.json"); }, {"t5.json", "truncated"});
  // Truncated inside the header, the trie size past the end, an empty trie.
  expect_error([&] { load(good.substr(0, 3)); }, {"t5.json", "truncated"});
  expect_error([&] { load(good.substr(0, 40)); }, {"t5.json", "truncated"});
  expect_error([&] { load(u32(0xFFFFFFFCu) + good.substr(4)); }, {"t5.json", "truncated"});
  expect_error([&] { load(u32(0) + "abc"); }, {"t5.json", "empty trie"});
  // Replacement strings that are not UTF-8.
  expect_error([&] { load(good + "\xff"); }, {"t5.json", "UTF-8"});
  // A root whose offset points past the array: an error when text is normalized, not a read
  // outside the blob.
  const tk::PrecompiledCharsmap far(u32(4) + u32(0xFFFFFu << 10), "t5.json");
  expect_error([&] { far.lookup("a"); }, {"t5.json", "outside"});
  // A leaf whose value lies past the replacement strings, or inside a character.
  std::string lying = good;
  uint32_t trie_bytes;
  std::memcpy(&trie_bytes, good.data(), 4);
  for (size_t pos = 4; pos < 4 + trie_bytes; pos += 4) {
    uint32_t v;
    std::memcpy(&v, lying.data() + pos, 4);
    if (v & (1u << 31)) {  // value units: point them all past the end
      v = (1u << 31) | 100000u;
      std::memcpy(lying.data() + pos, &v, 4);
    }
  }
  const tk::PrecompiledCharsmap past(lying, "t5.json");
  expect_error([&] { past.lookup("\uFF21"); }, {"t5.json", "replacement offset 100000"});
  // A charsmap whose one rule multiplies the text: a ResourceError, not an unbounded string.
  const std::string huge = build_charsmap({{"a", std::string(5000, 'b')}});
  const tk::PrecompiledNormalizer n(tk::PrecompiledCharsmap(huge, "t5.json"));
  const auto decoded = headscope::unicode::decode_utf8("aaaa");
  tk::NormalizedString s(decoded, 0, decoded.chars.size());
  EXPECT_THROW(n.normalize(s), headscope::ResourceError);
}

// XLM-R's Replace(" {2,}" -> " ") follows the Precompiled step. The library removes the whole match
// and inserts the content after it, aligned to the LAST matched character: "x  y" keeps the
// second space's bytes [2, 3) (what `tokenizers` reports; headscope used to keep the first's).
TEST(Precompiled, ReplaceAlignsItsContentToTheLastMatchedCharacter) {
  const nlohmann::json spec = {{"type", "Replace"}, {"pattern", {{"Regex", " {2,}"}}}, {"content", " "}};
  const auto replace = tk::read_normalizer(spec, "xlmr.json");
  const auto decoded = headscope::unicode::decode_utf8("x  y   ");
  tk::NormalizedString s(decoded, 0, decoded.chars.size());
  replace->normalize(s);
  ASSERT_EQ(s.utf8(), "x y ");
  EXPECT_EQ(s.alignment(1), (tk::Span{2, 3}));
  EXPECT_EQ(s.alignment(2), (tk::Span{3, 4}));
  EXPECT_EQ(s.alignment(3), (tk::Span{6, 7}));
  // A longer content: all three characters take b's span, [2, 3) (tokenizers' offsets). And
  // single-character matches side by side each keep their own span (Gemma's " " -> "▁").
  const auto grow =
      tk::read_normalizer({{"type", "Replace"}, {"pattern", {{"String", "ab"}}}, {"content", "XYZ"}}, "r");
  const auto zabq = headscope::unicode::decode_utf8("zabq");
  tk::NormalizedString g(zabq, 0, zabq.chars.size());
  grow->normalize(g);
  ASSERT_EQ(g.utf8(), "zXYZq");
  for (size_t i = 1; i <= 3; ++i) EXPECT_EQ(g.alignment(i), (tk::Span{2, 3})) << i;
  EXPECT_EQ(g.alignment(4), (tk::Span{3, 4}));
  const auto meta =
      tk::read_normalizer({{"type", "Replace"}, {"pattern", {{"String", " "}}}, {"content", "\u2581"}}, "r");
  const auto xy = headscope::unicode::decode_utf8("x  y");
  tk::NormalizedString m(xy, 0, xy.chars.size());
  meta->normalize(m);
  ASSERT_EQ(m.utf8(), "x\u2581\u2581y");
  EXPECT_EQ(m.alignment(1), (tk::Span{1, 2}));
  EXPECT_EQ(m.alignment(2), (tk::Span{2, 3}));
}

// ---- real charsmaps against tokenizers ----

TEST(Precompiled, TrainedVocabulariesAgreeWithTokenizers) {
  for (const std::string name : {"precompiled_nmt_nfkc", "precompiled_nfkc_cf"}) {
    const fs::path dir = headscope::testing::goldens_dir("sentencepiece") / name;
    std::ifstream in(dir / "cases.json");
    if (!in) {
      ADD_FAILURE() << "missing golden " << dir / "cases.json"
                    << "; run `make goldens`";
      continue;
    }
    const nlohmann::json cases = nlohmann::json::parse(in);
    ASSERT_GE(cases.size(), 2000u) << name;
    const std::string path = (dir / "tokenizer.json").string();
    const auto tok = Tokenizer::from_tokenizer_json(path);
    std::ifstream spec_in(path);
    const auto normalizer = tk::read_normalizer(nlohmann::json::parse(spec_in).at("normalizer"), path);
    size_t same_ids = 0, same_offsets = 0, same_normalized = 0, reported = 0;
    for (const nlohmann::json& c : cases) {
      const std::string text = c.at("text").get<std::string>();
      const auto decoded = headscope::unicode::decode_utf8(text);
      tk::NormalizedString s(decoded, 0, decoded.chars.size());
      normalizer->normalize(s);
      const bool normalized_ok = s.utf8() == c.at("normalized").get<std::string>();
      const Encoding enc = tok->encode(text, {});
      const auto ids = c.at("ids").get<std::vector<int32_t>>();
      const auto offsets = c.at("offsets").get<std::vector<std::vector<int64_t>>>();
      const bool ids_ok = enc.ids() == ids;
      bool offsets_ok = ids_ok;
      for (size_t i = 0; ids_ok && i < ids.size(); ++i) {
        offsets_ok = offsets_ok && enc.tokens[i].begin == offsets[i][0] && enc.tokens[i].end == offsets[i][1];
      }
      same_ids += ids_ok;
      same_offsets += offsets_ok;
      same_normalized += normalized_ok;
      if ((!ids_ok || !offsets_ok || !normalized_ok) && reported++ < 5) {
        std::string ours, expected;
        for (const auto& t : enc.tokens)
          ours += std::to_string(t.id) + "[" + std::to_string(t.begin) + "," + std::to_string(t.end) + ") ";
        for (size_t i = 0; i < ids.size(); ++i) {
          expected +=
              std::to_string(ids[i]) + "[" + std::to_string(offsets[i][0]) + "," + std::to_string(offsets[i][1]) + ") ";
        }
        ADD_FAILURE() << name << " differs on " << nlohmann::json(text).dump()
                      << "\n  normalized ours: " << nlohmann::json(s.utf8()).dump()
                      << " expected: " << c.at("normalized").dump() << "\n  ours:     " << ours
                      << "\n  expected: " << expected;
      }
    }
    std::printf("[ precompiled ] %-22s ids equal %zu/%zu, offsets equal %zu/%zu, normalized equal %zu/%zu\n",
                name.c_str(), same_ids, cases.size(), same_offsets, cases.size(), same_normalized, cases.size());
    EXPECT_EQ(same_ids, cases.size());
    EXPECT_EQ(same_offsets, cases.size());
    EXPECT_EQ(same_normalized, cases.size());
  }
}

}  // namespace
