// WordPiece tokenizer against the Hugging Face `tokenizers` library: ids, byte offsets and word
// indices on every string of tests/reference/golden_tokenizer.py (written to
// $HEADSCOPE_GOLDENS/tokenizer/), for the model's tokenizer.json, normalizer variants, added-token
// options and the vocab.txt fallback; BertNormalizer on every code point; and the error paths.
#include <gtest/gtest.h>

#include "test_support.h"

#include <unistd.h>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>

#include "headscope/error.h"
#include "headscope/limits.h"
#include "headscope/tokenizer.h"
#include "tokenizer/unicode.h"
#include "tokenizer/wordpiece.h"

namespace {

namespace fs = std::filesystem;
using headscope::EncodeOptions;
using headscope::Encoding;
using headscope::Error;
using headscope::Remedy;
using headscope::Tokenizer;

fs::path goldens() { return headscope::testing::goldens_dir("tokenizer"); }

fs::path model_dir() {
  const char* dir = std::getenv("HEADSCOPE_MODEL");
  return dir ? fs::path(dir) : fs::path(HEADSCOPE_SOURCE_DIR) / "models" / "all-MiniLM-L6-v2";
}

std::unique_ptr<Tokenizer> minilm() { return Tokenizer::from_model_dir(model_dir().string()); }

nlohmann::json read_json(const fs::path& path) {
  std::ifstream in(path);
  if (!in) throw std::runtime_error("missing golden " + path.string() + "; run `make goldens`");
  return nlohmann::json::parse(in);
}

std::string describe(const Encoding& e) {
  std::string s;
  for (const auto& t : e.tokens) {
    s += std::to_string(t.id) + "[" + std::to_string(t.begin) + "," + std::to_string(t.end) + ")w" +
         std::to_string(t.word) + " ";
  }
  return s;
}

// A temporary folder, removed at the end of the test.
struct TempDir {
  fs::path path;
  TempDir() {
    path = fs::temp_directory_path() / ("headscope_tok_" + std::to_string(::getpid()) + "_" +
                                        std::to_string(std::chrono::steady_clock::now().time_since_epoch().count()));
    fs::create_directories(path);
  }
  ~TempDir() { fs::remove_all(path); }
  void write(const std::string& name, const std::string& content) const {
    std::ofstream(path / name, std::ios::binary) << content;
  }
};

// Every golden case: the tokenizer it names must reproduce the library's ids, offsets and word
// indices on each string (add_special_tokens, no truncation).
TEST(TokenizerGolden, AgreesWithTokenizersLibrary) {
  const fs::path dir = goldens();
  ASSERT_FALSE(dir.empty());
  const nlohmann::json manifest = read_json(dir / "manifest.json");
  size_t total = 0, agree = 0, minilm_strings = 0;
  for (const nlohmann::json& c : manifest.at("cases")) {
    const std::string name = c.at("name").get<std::string>();
    const std::string source = c.at("tokenizer").get<std::string>();
    std::unique_ptr<Tokenizer> tok;
    if (source == "MODEL") {
      tok = minilm();
    } else if (fs::is_directory(dir / source)) {
      ASSERT_FALSE(fs::exists(dir / source / "tokenizer.json")) << name << " must exercise the vocab.txt path";
      tok = Tokenizer::from_model_dir((dir / source).string());
    } else {
      tok = Tokenizer::from_tokenizer_json((dir / source).string());
    }
    std::ifstream in(dir / c.at("expected").get<std::string>());
    ASSERT_TRUE(in) << "missing " << c.at("expected");
    size_t case_total = 0, case_agree = 0, reported = 0;
    for (std::string line; std::getline(in, line);) {
      const nlohmann::json g = nlohmann::json::parse(line);
      const std::string text = g.at("text").get<std::string>();
      const auto ids = g.at("ids").get<std::vector<int32_t>>();
      const auto words = g.at("words").get<std::vector<int32_t>>();
      const auto offsets = g.at("offsets").get<std::vector<std::vector<int64_t>>>();
      const Encoding enc = tok->encode(text, {});
      bool same = enc.ids() == ids;
      for (size_t i = 0; same && i < ids.size(); ++i) {
        const headscope::Token& t = enc.tokens[i];
        same = t.begin == offsets[i][0] && t.end == offsets[i][1] && t.word == words[i] &&
               t.special == (words[i] == -1) && t.text == tok->token_text(t.id);
      }
      ++case_total;
      case_agree += same;
      if (!same && reported++ < 5) {
        std::string expected;
        for (size_t i = 0; i < ids.size(); ++i) {
          expected += std::to_string(ids[i]) + "[" + std::to_string(offsets[i][0]) + "," +
                      std::to_string(offsets[i][1]) + ")w" + std::to_string(words[i]) + " ";
        }
        ADD_FAILURE() << name << " differs on " << nlohmann::json(text).dump() << "\n  ours:     " << describe(enc)
                      << "\n  expected: " << expected;
      }
    }
    std::printf("tokenizer agreement [%s]: %zu/%zu\n", name.c_str(), case_agree, case_total);
    EXPECT_EQ(case_agree, case_total) << name;
    if (name == "minilm") minilm_strings = case_total;
    total += case_total;
    agree += case_agree;
  }
  std::printf("tokenizer agreement: %zu/%zu\n", agree, total);
  EXPECT_GE(minilm_strings, 2000u);
  EXPECT_EQ(agree, total);
}

// BertNormalizer over every code point, for each configuration of the goldens: the chunks listed
// are those the library changes, every other chunk must come back unchanged.
TEST(TokenizerGolden, BertNormalizerOnEveryCodePoint) {
  const fs::path dir = goldens();
  ASSERT_FALSE(dir.empty());
  const nlohmann::json golden = read_json(dir / "normalizer.json");
  const char32_t chunk = golden.at("chunk").get<char32_t>();
  for (const auto& [name, entry] : golden.at("configs").items()) {
    const nlohmann::json& config = entry.at("config");
    const std::unique_ptr<headscope::tokenizer::Normalizer> normalizer =
        headscope::tokenizer::read_bert_normalizer(config, "normalizer.json");
    const nlohmann::json& changed = entry.at("changed");
    size_t chunks = 0, agree = 0, reported = 0;
    for (char32_t start = 0; start < 0x110000; start += chunk) {
      if (start >= 0xD800 && start < 0xE000) continue;  // surrogates are not characters
      std::u32string text;
      for (char32_t c = start; c < start + chunk; ++c) text.push_back(c);
      const std::string utf8 = headscope::unicode::to_utf8(text);
      const headscope::unicode::DecodedText decoded = headscope::unicode::decode_utf8(utf8);
      headscope::tokenizer::NormalizedString s(decoded, 0, decoded.chars.size());
      normalizer->normalize(s);
      const std::string key = std::to_string(static_cast<uint32_t>(start));
      const std::string expected = changed.contains(key) ? changed.at(key).get<std::string>() : utf8;
      const std::string ours = s.utf8();
      ++chunks;
      agree += ours == expected;
      if (ours != expected && reported++ < 5) {
        // Name the first differing character.
        const auto a = headscope::unicode::decode_utf8(ours).chars;
        const auto b = headscope::unicode::decode_utf8(expected).chars;
        size_t i = 0;
        while (i < a.size() && i < b.size() && a[i] == b[i]) ++i;
        char buf[160];
        std::snprintf(buf, sizeof buf,
                      "chunk U+%04X: first difference at output char %zu: ours U+%04X, expected U+%04X",
                      static_cast<unsigned>(start), i, i < a.size() ? static_cast<unsigned>(a[i]) : 0u,
                      i < b.size() ? static_cast<unsigned>(b[i]) : 0u);
        ADD_FAILURE() << name << ": " << buf;
      }
    }
    std::printf("normalizer agreement [%s]: %zu/%zu chunks of %u code points\n", name.c_str(), agree, chunks,
                static_cast<unsigned>(chunk));
    EXPECT_EQ(agree, chunks) << name;
  }
}

TEST(Tokenizer, TemplateAddsClsAndSep) {
  const auto tok = minilm();
  const Encoding e = tok->encode("Hello, world!", {});
  ASSERT_EQ(e.size(), 6u);
  // [CLS] hello , world ! [SEP]: ids are the 0-based line numbers of these entries in vocab.txt.
  EXPECT_EQ(e.ids(), (std::vector<int32_t>{101, 7592, 1010, 2088, 999, 102}));
  EXPECT_TRUE(e.tokens.front().special);
  EXPECT_TRUE(e.tokens.back().special);
  EXPECT_EQ(e.tokens.front().text, "[CLS]");
  EXPECT_EQ(e.tokens.back().text, "[SEP]");
  EXPECT_EQ(e.tokens.front().word, -1);
  EXPECT_EQ(e.tokens.front().begin, 0);
  EXPECT_EQ(e.tokens.front().end, 0);
  EXPECT_EQ(e.tokens[1].text, "hello");
  EXPECT_EQ(e.tokens[1].begin, 0);
  EXPECT_EQ(e.tokens[1].end, 5);
  EXPECT_EQ(e.tokens[2].word, 1);
  EXPECT_FALSE(e.truncated);

  EncodeOptions no_specials;
  no_specials.add_special_tokens = false;
  const Encoding bare = tok->encode("Hello, world!", no_specials);
  EXPECT_EQ(bare.ids(), (std::vector<int32_t>{7592, 1010, 2088, 999}));
  EXPECT_EQ(tok->encode("", {}).ids(), (std::vector<int32_t>{101, 102}));
}

TEST(Tokenizer, SpecialTokenTypedInTextIsOneToken) {
  const auto tok = minilm();
  const std::string text = "Paris is the [MASK] of France.";
  const Encoding e = tok->encode(text, {});
  size_t masks = 0;
  for (const auto& t : e.tokens) {
    if (t.id != 103) continue;
    ++masks;
    EXPECT_EQ(text.substr(t.begin, t.end - t.begin), "[MASK]");
    EXPECT_FALSE(t.special);  // it belongs to the text, not to the template
    EXPECT_EQ(t.word, 3);
  }
  EXPECT_EQ(masks, 1u);
}

TEST(Tokenizer, OffsetsPointIntoTheOriginalText) {
  const auto tok = minilm();
  // "É" (2 bytes) lowercased and stripped to "e"; "ﬁ" (3 bytes) stays one character; the
  // zero-width space (3 bytes) disappears; the ideographs become words of their own.
  const std::string text = "\xC3\x89t\xC3\xA9 \xEF\xAC\x81n \xE2\x80\x8B\xE5\x9B\xBD\xE5\xAE\xB6";
  const Encoding e = tok->encode(text, {});
  for (const auto& t : e.tokens) {
    if (t.special) continue;
    ASSERT_LE(t.end, static_cast<int64_t>(text.size()));
    ASSERT_LT(t.begin, t.end);
  }
  EXPECT_EQ(e.tokens[1].begin, 0);  // "ete" starts at "É"
  // The last two tokens are the ideographs, 3 bytes each, at the end of the text.
  const auto& last = e.tokens[e.size() - 2];
  EXPECT_EQ(last.end, static_cast<int64_t>(text.size()));
  EXPECT_EQ(last.end - last.begin, 3);
}

TEST(Tokenizer, InvalidUtf8NamesTheByteOffset) {
  const auto tok = minilm();
  const std::pair<std::string, int> cases[] = {
      {std::string("abc\xC3(", 5), 3},           // a lead byte without its continuation
      {std::string("ok \x80", 4), 3},            // a stray continuation byte
      {std::string("\xC0\xAF", 2), 0},           // overlong '/'
      {std::string("ab\xED\xA0\x80", 5), 2},     // an encoded surrogate (U+D800)
      {std::string("x\xF4\x90\x80\x80", 5), 1},  // above U+10FFFF
      {std::string("hello\xE2\x82", 7), 5},      // the text ends inside a character
      {std::string("\xFF", 1), 0},
  };
  for (const auto& [text, offset] : cases) {
    try {
      tok->encode(text, {});
      ADD_FAILURE() << "accepted invalid UTF-8 at byte " << offset;
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("at byte offset " + std::to_string(offset)), std::string::npos) << e.what();
    }
  }
  // Valid 4-byte characters and U+10FFFF itself pass.
  EXPECT_NO_THROW(tok->encode("\xF0\x9F\x99\x82 \xF4\x8F\xBF\xBF", {}));
}

TEST(Tokenizer, TooLongTextIsAnErrorUnlessTruncating) {
  const auto tok = minilm();
  std::string text;
  for (int i = 0; i < 40; ++i) text += "the cat sat on the mat. ";
  const Encoding full = tok->encode(text, {});
  ASSERT_EQ(full.size(), 40u * 7u + 2u);  // 7 tokens per sentence, plus [CLS] and [SEP]

  EncodeOptions limit;
  limit.max_length = 16;
  try {
    tok->encode(text, limit);
    ADD_FAILURE() << "no error for a text longer than max_length";
  } catch (const Error& e) {
    // What is wrong, in the core's terms; the remedy is for each frontend to phrase.
    EXPECT_EQ(std::string(e.what()), "text is " + std::to_string(full.size()) + " tokens, the model allows at most 16");
    EXPECT_EQ(e.remedy(), Remedy::kTruncate);
  }

  limit.truncate = true;
  const Encoding cut = tok->encode(text, limit);
  ASSERT_EQ(cut.size(), 16u);
  EXPECT_TRUE(cut.truncated);
  EXPECT_EQ(cut.tokens.front().id, 101);
  EXPECT_EQ(cut.tokens.back().id, 102);
  for (size_t i = 1; i + 1 < cut.size(); ++i) {
    EXPECT_EQ(cut.tokens[i].id, full.tokens[i].id);
    EXPECT_EQ(cut.tokens[i].begin, full.tokens[i].begin);
  }

  // Exactly at the limit: nothing is cut.
  limit.max_length = static_cast<int64_t>(full.size());
  limit.truncate = false;
  const Encoding exact = tok->encode(text, limit);
  EXPECT_EQ(exact.size(), full.size());
  EXPECT_FALSE(exact.truncated);

  // A limit that cannot even hold [CLS] and [SEP].
  limit.max_length = 1;
  limit.truncate = true;
  EXPECT_THROW(tok->encode(text, limit), Error);
}

TEST(Tokenizer, VocabularyLookups) {
  const auto tok = minilm();
  EXPECT_EQ(tok->vocab_size(), 30522);
  EXPECT_EQ(tok->token_text(101), "[CLS]");
  EXPECT_EQ(tok->token_text(7592), "hello");
  EXPECT_THROW(tok->token_text(-1), Error);
  EXPECT_THROW(tok->token_text(30522), Error);
}

TEST(Tokenizer, VocabTxtFallbackMatchesTokenizerJson) {
  // A folder with only vocab.txt and tokenizer_config.json encodes as the tokenizer.json does.
  TempDir dir;
  fs::copy_file(model_dir() / "vocab.txt", dir.path / "vocab.txt");
  fs::copy_file(model_dir() / "tokenizer_config.json", dir.path / "tokenizer_config.json");
  const auto from_vocab = Tokenizer::from_model_dir(dir.path.string());
  const auto from_json = minilm();
  for (const char* text : {"Hello, World! Ça va? [MASK] 東京", "unbelievable tokenization", ""}) {
    const Encoding a = from_vocab->encode(text, {});
    const Encoding b = from_json->encode(text, {});
    EXPECT_EQ(a.ids(), b.ids()) << text;
    EXPECT_EQ(describe(a), describe(b)) << text;
  }
  EXPECT_EQ(from_vocab->vocab_size(), from_json->vocab_size());
}

TEST(Tokenizer, MissingOrUnknownTokenizerIsAnError) {
  TempDir dir;
  EXPECT_THROW(Tokenizer::from_model_dir(dir.path.string()), Error);  // neither file

  // A model type with no reader: the message names it.
  dir.write("tokenizer.json", R"({"model": {"type": "WordLevel", "vocab": {"a": 0}, "unk_token": "a"}})");
  try {
    Tokenizer::from_model_dir(dir.path.string());
    ADD_FAILURE() << "accepted an unknown model type";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("'WordLevel' is not supported"), std::string::npos) << e.what();
  }

  dir.write("tokenizer.json", R"({"model": {"type": "WordPiece", "vocab": {"a": 0}, "unk_token": "[UNK]"}})");
  EXPECT_THROW(Tokenizer::from_model_dir(dir.path.string()), Error);  // unk token missing from vocab

  dir.write("tokenizer.json", R"({"model": {"type": "WordPiece", "vocab": {"[UNK]": 0, "a": 1}},
                                 "normalizer": {"type": "NoSuchNormalizer"}})");
  EXPECT_THROW(Tokenizer::from_model_dir(dir.path.string()), Error);  // unknown normalizer

  dir.write("tokenizer.json", "{\"model\": ");
  EXPECT_THROW(Tokenizer::from_model_dir(dir.path.string()), Error);  // truncated JSON

  dir.write("tokenizer.json", R"({"model": {"type": "WordPiece", "vocab": ["a"]}})");
  EXPECT_THROW(Tokenizer::from_model_dir(dir.path.string()), Error);  // vocab of the wrong kind

  EXPECT_THROW(Tokenizer::from_tokenizer_json((dir.path / "absent.json").string()), Error);
}

TEST(Tokenizer, MinimalTokenizerJsonWithoutNormalizer) {
  // Hand-built: no normalizer, no post-processor; "unaffable" -> un ##aff ##able (the WordPiece
  // example of the BERT paper's code), offsets 0-2, 2-5, 5-9; an uncoverable word is one [UNK].
  TempDir dir;
  dir.write("tokenizer.json", R"({"model": {"type": "WordPiece", "unk_token": "[UNK]",
      "continuing_subword_prefix": "##", "max_input_chars_per_word": 100,
      "vocab": {"[UNK]": 0, "un": 1, "##aff": 2, "##able": 3, "aff": 4}},
      "pre_tokenizer": {"type": "BertPreTokenizer"}})");
  const auto tok = Tokenizer::from_model_dir(dir.path.string());
  const Encoding e = tok->encode("unaffable zzz", {});
  ASSERT_EQ(e.size(), 4u);
  EXPECT_EQ(e.ids(), (std::vector<int32_t>{1, 2, 3, 0}));
  EXPECT_EQ(e.tokens[1].begin, 2);
  EXPECT_EQ(e.tokens[1].end, 5);
  EXPECT_EQ(e.tokens[3].begin, 10);
  EXPECT_EQ(e.tokens[3].end, 13);
  EXPECT_EQ(e.tokens[3].word, 1);
}

// ---- hostile tokenizer.json files: refused with an Error naming the file, never a crash ----

// A WordPiece model with single letters and their ## continuations, around `rest` (more keys).
std::string tiny_tokenizer(const std::string& rest) {
  return R"({"model": {"type": "WordPiece", "unk_token": "[UNK]", "max_input_chars_per_word": 1000000000,
             "vocab": {"[UNK]": 0, "a": 1, "##a": 2, "b": 3, "##b": 4}})" +
         (rest.empty() ? std::string() : ", " + rest) + "}";
}

// `depth` Sequences of `key`, each holding the next, around `leaf`.
std::string nested(const std::string& key, int depth, const std::string& leaf) {
  std::string open, close;
  for (int i = 0; i < depth; ++i) {
    open += R"({"type": "Sequence", ")" + key + R"(": [)";
    close += "]}";
  }
  return open + leaf + close;
}

std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  return "(no error)";
}

// Found by mutation: 20,000 nested Sequences overflowed the stack of the recursive readers.
TEST(TokenizerHostile, DeepSequencesAreRefusedWithTheirPath) {
  const struct {
    const char* component;
    const char* key;
    const char* leaf;
  } cases[] = {{"pre_tokenizer", "pretokenizers", R"({"type": "Whitespace"})"},
               {"normalizer", "normalizers", R"({"type": "Lowercase"})"},
               {"post_processor", "processors", R"({"type": "ByteLevel"})"},
               {"decoder", "decoders", R"({"type": "ByteLevel"})"}};
  for (const auto& c : cases) {
    const std::string json = tiny_tokenizer("\"" + std::string(c.component) + "\": " + nested(c.key, 20000, c.leaf));
    const std::string message = error_of([&] { Tokenizer::from_json_string(json, "hostile.json"); });
    EXPECT_EQ(message.rfind("hostile.json: ", 0), 0u) << message;
    const std::string path = std::string(c.component) + "." + c.key + "[0]." + c.key + "[0]";
    EXPECT_NE(message.find(path), std::string::npos) << message;
    EXPECT_NE(message.find(std::to_string(headscope::limits::kMaxTokenizerJsonDepth)), std::string::npos) << message;
    // A few levels are fine and behave as the leaf alone.
    const auto tok = Tokenizer::from_json_string(
        tiny_tokenizer("\"" + std::string(c.component) + "\": " + nested(c.key, 5, c.leaf)));
    EXPECT_EQ(tok->encode("a", {}).ids(), std::vector<int32_t>{1}) << c.component;
  }
}

// Found by mutation: a vocabulary id of 100,000,000 resized the id table to it (6.4 GB).
TEST(TokenizerHostile, SparseOrHugeIdsAreRefused) {
  const auto message = [](const std::string& json) {
    try {
      Tokenizer::from_json_string(json, "ids.json");
    } catch (const headscope::ResourceError& e) {
      return std::string(e.what());
    } catch (const Error& e) {
      return "(Error, not ResourceError) " + std::string(e.what());
    }
    return std::string("(accepted)");
  };
  const std::string vocab_bomb = R"({"model": {"type": "WordPiece", "vocab": {"[UNK]": 0, "a": 100000000}}})";
  EXPECT_NE(message(vocab_bomb).find("ids.json: model.vocab entry 'a' has the id 100000000"), std::string::npos)
      << message(vocab_bomb);
  const std::string added_bomb = tiny_tokenizer(R"("added_tokens": [{"id": 100000000, "content": "<x>"}])");
  EXPECT_NE(message(added_bomb).find("'<x>' has the id 100000000"), std::string::npos) << message(added_bomb);
  EXPECT_THROW(Tokenizer::from_json_string(R"({"model": {"type": "BPE", "vocab": {"a": 3e300}}})"), Error);
  EXPECT_THROW(Tokenizer::from_json_string(R"({"model": {"type": "BPE", "vocab": {"a": 18446744073709551615}}})"),
               Error);
  EXPECT_THROW(Tokenizer::from_json_string(tiny_tokenizer(R"("added_tokens": [{"id": -1, "content": "<x>"}])")), Error);
  // A few unused ids are fine: the table has one slot per id up to the largest.
  const auto tok = Tokenizer::from_json_string(tiny_tokenizer(R"("added_tokens": [{"id": 40, "content": "<x>"}])"));
  EXPECT_EQ(tok->vocab_size(), 41);
}

// Found by mutation: a Sequence of Replace normalizers, each doubling the text, grew without bound;
// so did a chain of ByteLevel pre-tokenizers (each doubles non-ASCII text).
TEST(TokenizerHostile, NormalizersAndPreTokenizersCannotMultiplyTheText) {
  const std::string doubling = R"({"type": "Replace", "pattern": {"String": "a"}, "content": "aa"})";
  const auto chain = [&](int n) {
    std::string steps;
    for (int i = 0; i < n; ++i) steps += (i ? ", " : "") + doubling;
    return tiny_tokenizer(R"("normalizer": {"type": "Sequence", "normalizers": [)" + steps + "]}");
  };
  // Three doublings of "a": 8 letters, one token each (a ##a ##a ...).
  EXPECT_EQ(Tokenizer::from_json_string(chain(3))->encode("a", {}).size(), 8u);
  const auto bomb = Tokenizer::from_json_string(chain(40), "replace.json");
  EXPECT_THROW(bomb->encode("aaaa", {}), headscope::ResourceError);
  EXPECT_NE(error_of([&] { bomb->encode("aaaa", {}); }).find("replace.json: a Replace normalizer"), std::string::npos)
      << error_of([&] { bomb->encode("aaaa", {}); });

  std::string byte_levels;
  for (int i = 0; i < 40; ++i)
    byte_levels += std::string(i ? ", " : "") + R"({"type": "ByteLevel", "use_regex": false})";
  const auto spelled = Tokenizer::from_json_string(
      tiny_tokenizer(R"("pre_tokenizer": {"type": "Sequence", "pretokenizers": [)" + byte_levels + "]}"));
  EXPECT_THROW(spelled->encode("\xC3\xA9t\xC3\xA9", {}), headscope::ResourceError);
}

// Found by review: a split regex from tokenizer.json that backtracks exponentially ran for hours
// (ICU has no memo); the matcher now has a budget of backtracking proportional to the text.
TEST(TokenizerHostile, CatastrophicRegexIsStopped) {
  const auto split = [](const std::string& pattern) {
    return Tokenizer::from_json_string(tiny_tokenizer(R"("pre_tokenizer": {"type": "Split", "pattern": {"Regex": ")" +
                                                      pattern + R"("}, "behavior": "Isolated"})"),
                                       "regex.json");
  };
  const auto bomb = split("(a+)+b");
  EXPECT_THROW(bomb->encode(std::string(40, 'a'), {}), headscope::ResourceError);
  EXPECT_NE(error_of([&] { bomb->encode(std::string(40, 'a'), {}); }).find("regex.json: tokenizer: regex"),
            std::string::npos);
  // The same pattern where it matches quickly, and a long text with an ordinary pattern.
  EXPECT_EQ(bomb->encode("aab", {}).ids(), (std::vector<int32_t>{1, 2, 4}));  // one piece: a ##a ##b
  const auto words = split("a+");
  EXPECT_EQ(words->encode(std::string(100000, 'a') + "b" + std::string(100000, 'a'), {}).size(), 200001u);
}

// Found by review: WordPiece tried every end of a word from the last character down, O(n²) lookups
// for a word of n characters when max_input_chars_per_word is large; 300,000 letters took minutes.
// Now the search starts at the longest piece an entry could match.
TEST(TokenizerHostile, LongWordIsLinear) {
  const auto tok = Tokenizer::from_json_string(tiny_tokenizer(""));
  const headscope::Encoding e = tok->encode(std::string(300000, 'a'), {});
  ASSERT_EQ(e.size(), 300000u);
  EXPECT_EQ(e.tokens[0].id, 1);
  EXPECT_EQ(e.tokens[1].id, 2);
  EXPECT_EQ(e.tokens.back().begin, 299999);
}

}  // namespace

// How tokens read on the page and in the CLI: the text they cover, not byte-level symbols.
TEST(TokenDisplay, ShowsTheTextATokenCovers) {
  using headscope::Token;
  using headscope::token_display;
  const std::string text = "Grüße world\nplaying";  // "Grüße" is 7 bytes: ü and ß take two each
  const auto tok = [](const char* vocab, int64_t b, int64_t e) { return Token{0, vocab, b, e, false, 0}; };
  EXPECT_EQ(token_display(text, tok("Gr", 0, 2)), "Gr");
  EXPECT_EQ(token_display(text, tok("Ã", 2, 3)), "ü");  // a byte-level piece inside ü: the whole character
  EXPECT_EQ(token_display(text, tok("¼", 3, 4)), "ü");
  EXPECT_EQ(token_display(text, tok("Ġworld", 7, 13)), "world");  // the leading space is dropped, Ġ never shows
  EXPECT_EQ(token_display(text, tok("Ċ", 13, 14)), "↵");
  EXPECT_EQ(token_display(text, tok("Ġ", 7, 8)), "␣");
  EXPECT_EQ(token_display(text, tok("##ing", 18, 21)), "##ing");  // WordPiece keeps its split visible
  Token cls{101, "[CLS]", 0, 0, true, -1};
  EXPECT_EQ(token_display(text, cls), "[CLS]");
  EXPECT_EQ(token_display(text, tok("bad", 20, 99)), "bad");  // offsets outside the text: the vocabulary entry
}
