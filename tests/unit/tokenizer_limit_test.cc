// Encoding under a length limit (EncodeOptions::max_length) stops one token past it: the tokens kept
// must be the first tokens of the whole encoding, for every kind of tokenizer pipeline, and a text
// far over the limit must cost what the limit needs, not what the text would. The tokenizers are the
// goldens' tokenizer.json files (written by tests/reference/golden_*.py from the `tokenizers`
// library, whose encodings the other tokenizer suites compare against), the default model's, and the
// two GGUF vocabularies of models/.
#include <gtest/gtest.h>
#include <malloc.h>

#include <atomic>
#include <cstdlib>
#include <filesystem>
#include <new>
#include <random>
#include <string>
#include <vector>

#include "headscope/error.h"
#include "headscope/tokenizer.h"
#include "io/gguf.h"
#include "test_support.h"
#include "tokenizer/gguf_vocab.h"

// ---- bytes allocated through operator new, current and peak, counted for this whole test binary ----
namespace {
std::atomic<int64_t> g_current{0};
std::atomic<int64_t> g_peak{0};

void* counted_alloc(size_t n) {
  void* p = std::malloc(n == 0 ? 1 : n);
  if (p == nullptr) throw std::bad_alloc();
  const int64_t now = g_current += static_cast<int64_t>(malloc_usable_size(p));
  int64_t peak = g_peak.load();
  while (now > peak && !g_peak.compare_exchange_weak(peak, now)) {
  }
  return p;
}
void counted_free(void* p) {
  if (p == nullptr) return;
  g_current -= static_cast<int64_t>(malloc_usable_size(p));
  std::free(p);
}
}  // namespace

void* operator new(size_t n) { return counted_alloc(n); }
void* operator new[](size_t n) { return counted_alloc(n); }
void* operator new(size_t n, const std::nothrow_t&) noexcept {
  try {
    return counted_alloc(n);
  } catch (...) {
    return nullptr;
  }
}
void* operator new[](size_t n, const std::nothrow_t& t) noexcept { return operator new(n, t); }
void operator delete(void* p) noexcept { counted_free(p); }
void operator delete[](void* p) noexcept { counted_free(p); }
void operator delete(void* p, size_t) noexcept { counted_free(p); }
void operator delete[](void* p, size_t) noexcept { counted_free(p); }

namespace {

namespace fs = std::filesystem;
using headscope::EncodeOptions;
using headscope::Encoding;
using headscope::Error;
using headscope::Token;
using headscope::Tokenizer;

// Peak bytes held through operator new while `f` runs, beyond what was held when it started.
template <typename F>
int64_t peak_bytes_during(F&& f) {
  const int64_t start = g_current.load();
  g_peak = start;
  f();
  return g_peak.load() - start;
}

struct Named {
  std::string name;
  std::unique_ptr<Tokenizer> tokenizer;
};

std::vector<Named> tokenizers() {
  std::vector<Named> out;
  const fs::path goldens = headscope::testing::goldens_dir("");
  for (const char* sub : {"bpe/gpt2", "bpe/gpt2_prefix", "bpe/llama3", "bpe/smollm", "bpe/spm_legacy",
                          "bpe/spm_metaspace", "sentencepiece/unigram", "sentencepiece/unigram_bytes",
                          "sentencepiece/precompiled_nmt_nfkc", "tokenizer/cased", "tokenizer/added_tokens"}) {
    fs::path path = goldens / sub / "tokenizer.json";
    if (!fs::exists(path)) path = goldens / (std::string(sub) + ".tokenizer.json");
    if (!fs::exists(path)) {
      ADD_FAILURE() << "missing golden tokenizer " << path << "; run `make goldens`";
      continue;
    }
    out.push_back({sub, Tokenizer::from_tokenizer_json(path.string())});
  }
  out.push_back({"default model", Tokenizer::from_model_dir(headscope::testing::env_or_fail("HEADSCOPE_MODEL"))});
  const fs::path models = fs::path(HEADSCOPE_SOURCE_DIR) / "models";
  for (const char* gguf :
       {"SmolLM2-135M-Instruct/SmolLM2-135M-Instruct.Q4_1.gguf", "gemma-3-270m/gemma-3-270m-q4_k_m.gguf"}) {
    const fs::path path = models / gguf;
    if (!fs::exists(path)) {
      ADD_FAILURE() << "missing " << path;
      continue;
    }
    out.push_back({gguf, headscope::tokenizer::tokenizer_from_gguf(headscope::io::GgufFile(path.string()))});
  }
  return out;
}

// About `bytes` of mixed text: words, punctuation, digit runs, runs of spaces, line breaks and tabs,
// accented, CJK and emoji characters, and literal special tokens.
std::string mixed_text(size_t bytes, uint32_t seed) {
  static const std::vector<std::string> pieces = {
      "the",   "cat",   "sat",         "on",     "mat",    "because", "it",   "was",   "tired",   "don't",
      "We'll", "naïve", "Über",        "café",   "日本語", "の",      "🙂", "12345", "3.14159", "e-mail",
      "http",  "://",   "example.com", "[MASK]", "<s>",    "</s>",    "(",    ")",     ",",       ".",
      "?!",    "'s",    "ﬁne",         "Ａｂｃ", "ＡＢ",   "straße",  "—",    "x",     "y",       "z",
  };
  static const std::vector<std::string> gaps = {" ", " ", " ", " ", "  ", "   ", "\n", "\n\n", "\t", ""};
  std::mt19937 rng(seed);
  std::string text;
  while (text.size() < bytes) {
    text += pieces[rng() % pieces.size()];
    text += gaps[rng() % gaps.size()];
  }
  return text;
}

void expect_prefix(const std::string& name, const Encoding& whole, const Encoding& cut, size_t n_specials,
                   size_t kept) {
  ASSERT_EQ(cut.size(), kept + n_specials) << name;
  size_t j = 0;
  for (const Token& t : cut.tokens) {
    if (t.special) continue;
    // whole has no specials (add_special_tokens off), so its j-th token is the j-th text token.
    ASSERT_LT(j, whole.size()) << name;
    const Token& w = whole.tokens[j];
    ASSERT_TRUE(t.id == w.id && t.begin == w.begin && t.end == w.end && t.word == w.word)
        << name << ": token " << j << " is " << t.id << " [" << t.begin << ", " << t.end << ") word " << t.word
        << ", the whole encoding has " << w.id << " [" << w.begin << ", " << w.end << ") word " << w.word;
    ++j;
  }
}

// For each limit: with truncation the first tokens of the whole encoding (and the specials); without,
// an error exactly when the whole encoding is over the limit.
void check_limits(const Named& t, const std::string& text, const std::string& what) {
  const std::string name = t.name + " on " + what;
  const Encoding whole = t.tokenizer->encode(text, {.add_special_tokens = false});
  const Encoding with_specials = t.tokenizer->encode(text, {});
  const size_t n_specials = with_specials.size() - whole.size();
  const size_t total = with_specials.size();
  for (size_t limit :
       {n_specials + 1, n_specials + 2, n_specials + 7, size_t{512}, size_t{4000}, total - 1, total, total + 1}) {
    if (limit <= n_specials || limit < 1) continue;
    EncodeOptions o;
    o.max_length = static_cast<int64_t>(limit);
    o.truncate = true;
    const Encoding cut = t.tokenizer->encode(text, o);
    EXPECT_EQ(cut.truncated, total > limit) << name << " limit " << limit;
    expect_prefix(name + " limit " + std::to_string(limit), whole, cut, n_specials,
                  std::min(total, limit) - n_specials);
    o.truncate = false;
    if (total > limit) {
      EXPECT_THROW(t.tokenizer->encode(text, o), Error) << name << " limit " << limit;
    } else {
      EXPECT_EQ(t.tokenizer->encode(text, o).size(), total) << name << " limit " << limit;
    }
  }
}

// Sparse text: words of 1 to 400 letters (WordPiece makes one [UNK] of a word over 100 characters)
// between runs of up to 300 spaces and line breaks, so that few tokens come per byte and the
// prefixes leading_tokens encodes end inside a word at about the token wanted; every limit of a
// range is tried.
std::string long_words(size_t bytes, uint32_t seed) {
  std::mt19937 rng(seed);
  std::string text;
  while (text.size() < bytes) {
    const size_t n = 1 + rng() % 400;
    for (size_t i = 0; i < n; ++i) text += static_cast<char>('a' + rng() % 26);
    const size_t gap = 1 + rng() % 300;
    for (size_t i = 0; i < gap; ++i) text += rng() % 20 == 0 ? '\n' : ' ';
  }
  return text;
}

TEST(TokenizerLimit, EveryLimitOverLongWordsKeepsAPrefix) {
  const std::string text = long_words(40000, 5);
  for (const Named& t : tokenizers()) {
    const Encoding whole = t.tokenizer->encode(text, {.add_special_tokens = false});
    const size_t n_specials =
        t.tokenizer->encode("a", {}).size() - t.tokenizer->encode("a", {.add_special_tokens = false}).size();
    for (size_t kept = 1; kept <= std::min<size_t>(whole.size(), 200); ++kept) {
      EncodeOptions o;
      o.max_length = static_cast<int64_t>(kept + n_specials);
      o.truncate = true;
      expect_prefix(t.name + " on long words, limit " + std::to_string(o.max_length), whole,
                    t.tokenizer->encode(text, o), n_specials, kept);
      if (::testing::Test::HasFatalFailure()) return;
    }
  }
}

TEST(TokenizerLimit, TruncatedEncodingIsAPrefixOfTheWholeOne) {
  const std::vector<Named> all = tokenizers();
  ASSERT_GE(all.size(), 10u);
  const std::vector<std::pair<std::string, std::string>> texts = {
      {"a short text", "Hello, world! The cat sat."},
      {"60 KB of mixed text", mixed_text(60000, 1)},
      {"another 60 KB", mixed_text(60000, 2)},
      {"30 KB of one letter", std::string(30000, 'a')},
      {"a word of 20 KB between words", "some words " + std::string(20000, 'q') + " and more words after it"},
      {"20 KB of spaces, then words", std::string(20000, ' ') + mixed_text(3000, 3)},
      {"20 KB of digits", std::string(20000, '7')},
  };
  for (const Named& t : all)
    for (const auto& [what, text] : texts) check_limits(t, text, what);
}

// A 10 MB text under a 512-token limit: only a prefix of it is tokenised. The whole text would take
// hundreds of megabytes (tokens with their strings, normalized characters with alignments).
TEST(TokenizerLimit, ATextFarOverTheLimitCostsWhatTheLimitNeeds) {
  const std::vector<Named> all = tokenizers();
  const std::string huge = mixed_text(10'000'000, 4);
  const std::string sample = mixed_text(1'000'000, 4);
  for (const Named& t : all) {
    EncodeOptions o;
    o.max_length = 512;
    o.truncate = true;
    Encoding cut;
    const int64_t bounded = peak_bytes_during([&] { cut = t.tokenizer->encode(huge, o); });
    EXPECT_EQ(cut.size(), 512u) << t.name;
    EXPECT_LT(bounded, int64_t{8} << 20) << t.name << ": " << bounded << " bytes for 512 tokens of a 10 MB text";
    o.truncate = false;
    const int64_t refused = peak_bytes_during([&] { EXPECT_THROW(t.tokenizer->encode(huge, o), Error) << t.name; });
    EXPECT_LT(refused, int64_t{8} << 20) << t.name << ": " << refused << " bytes to refuse a 10 MB text";
    // The counter sees the tokenizer's allocations: a whole encoding of 1 MB takes far more.
    const int64_t whole = peak_bytes_during([&] { t.tokenizer->encode(sample, {}); });
    EXPECT_GT(whole, int64_t{16} << 20) << t.name;
  }
}

}  // namespace
