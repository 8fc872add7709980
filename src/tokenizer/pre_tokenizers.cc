// headscope — pre-tokenizers, following tokenizers/src/pre_tokenizers/*.rs; see pre_tokenizers.h.
#include "tokenizer/pre_tokenizers.h"

#include <unicode/uchar.h>

#include <array>
#include <nlohmann/json.hpp>

#include "headscope/error.h"
#include "tokenizer/normalized_string.h"
#include "tokenizer/pattern.h"
#include "tokenizer/unicode.h"

namespace headscope::tokenizer {

// ------------------------------------------------------------------ byte-level alphabet

namespace {

struct ByteTable {
  std::array<char32_t, 256> to_char{};
  ByteTable() {
    char32_t next = 256;
    for (int b = 0; b < 256; ++b) {
      const bool printable = (b >= 33 && b <= 126) || (b >= 161 && b <= 172) || (b >= 174 && b <= 255);
      to_char[static_cast<size_t>(b)] = printable ? static_cast<char32_t>(b) : next++;
    }
  }
};

const ByteTable& byte_table() {
  static const ByteTable table;
  return table;
}

}  // namespace

char32_t byte_to_char(uint8_t byte) { return byte_table().to_char[byte]; }

int char_to_byte(char32_t c) {
  if ((c >= 33 && c <= 126) || (c >= 161 && c <= 172) || (c >= 174 && c <= 255)) return static_cast<int>(c);
  if (c < 256 || c > 256 + 67) return -1;
  for (int b = 0; b < 256; ++b) {
    if (byte_table().to_char[static_cast<size_t>(b)] == c) return b;
  }
  return -1;
}

const char* const kGpt2SplitPattern = R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)";
const char* const kLlama3SplitPattern =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
const char* const kQwen2SplitPattern =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";

// ------------------------------------------------------------------ pre-tokenizers

namespace {

// Rust's char::is_numeric: general category Nd, Nl or No.
bool is_numeric(char32_t c) {
  const int8_t type = u_charType(static_cast<UChar32>(c));
  return type == U_DECIMAL_DIGIT_NUMBER || type == U_LETTER_NUMBER || type == U_OTHER_NUMBER;
}

// Runs the steps one after the other, each on every word the previous one produced.
class SequencePreTokenizer final : public PreTokenizer {
 public:
  std::vector<std::unique_ptr<PreTokenizer>> steps;
  void pre_tokenize(const NormalizedString& piece, std::vector<NormalizedString>& words) const override {
    std::vector<NormalizedString> current{piece}, next;
    for (const auto& step : steps) {
      next.clear();
      // The words of one piece, together, stay within the piece's size limit; checked after each
      // word so that steps which multiply the text (a chain of ByteLevel) stop early.
      size_t total = 0, counted = 0;
      for (const NormalizedString& w : current) {
        step->pre_tokenize(w, next);
        for (; counted < next.size(); ++counted) total += next[counted].size();
        piece.check_size(total, "a Sequence pre-tokenizer");
      }
      std::swap(current, next);
    }
    for (NormalizedString& w : current) {
      if (!w.empty()) words.push_back(std::move(w));
    }
  }
};

// GPT-2's pre-tokenizer (tokenizers/src/pre_tokenizers/byte_level.rs): optionally a space before
// the piece, optionally the GPT-2 split regex, then every UTF-8 byte becomes its byte-level
// character (the first byte of a character replaces it, the others are insertions, so all bytes
// of a character keep its original span).
class ByteLevelPreTokenizer final : public PreTokenizer {
 public:
  bool add_prefix_space = false;
  bool use_regex = true;
  Regex regex{kGpt2SplitPattern};

  void pre_tokenize(const NormalizedString& piece, std::vector<NormalizedString>& words) const override {
    NormalizedString p = piece;
    if (add_prefix_space && !p.empty() && p.chars()[0] != U' ') prepend(p, U" ");
    const size_t first = words.size();
    if (use_regex) {
      split_at_matches(p, regex.find_all(p.chars()), SplitBehavior::kIsolated, false, words);
    } else if (!p.empty()) {
      words.push_back(std::move(p));
    }
    std::string bytes;
    std::vector<CharChange> dest;
    for (size_t k = first; k < words.size(); ++k) {
      NormalizedString& w = words[k];
      dest.clear();
      for (char32_t c : w.chars()) {
        bytes.clear();
        unicode::append_utf8(c, bytes);
        for (size_t i = 0; i < bytes.size(); ++i) {
          dest.push_back({byte_to_char(static_cast<uint8_t>(bytes[i])), i == 0 ? 0 : 1});
        }
      }
      w.transform(dest, 0);
    }
  }
};

class SplitPreTokenizer final : public PreTokenizer {
 public:
  std::u32string literal;
  std::unique_ptr<Regex> regex;
  SplitBehavior behavior = SplitBehavior::kIsolated;
  bool invert = false;
  void pre_tokenize(const NormalizedString& piece, std::vector<NormalizedString>& words) const override {
    split_at_matches(piece, regex ? regex->find_all(piece.chars()) : literal_matches(piece.chars(), literal), behavior,
                     invert, words);
  }
};

class DigitsPreTokenizer final : public PreTokenizer {
 public:
  bool individual_digits = false;
  void pre_tokenize(const NormalizedString& piece, std::vector<NormalizedString>& words) const override {
    split_at_matches(piece, char_matches(piece.chars(), is_numeric),
                     individual_digits ? SplitBehavior::kIsolated : SplitBehavior::kContiguous, false, words);
  }
};

// SentencePiece's treatment of spaces (tokenizers/src/pre_tokenizers/metaspace.rs): every ' '
// becomes the replacement (▁), which is also put in front of every piece ("always") or only of a
// piece that starts the text ("first"); optionally the piece is then cut before each ▁.
class MetaspacePreTokenizer final : public PreTokenizer {
 public:
  enum class Prepend { kAlways, kFirst, kNever };
  char32_t replacement = U'\u2581';
  Prepend scheme = Prepend::kAlways;
  bool split = true;
  void pre_tokenize(const NormalizedString& piece, std::vector<NormalizedString>& words) const override {
    NormalizedString p = piece;
    p.map([&](char32_t c) { return c == U' ' ? replacement : c; });
    const bool starts_with_replacement = !p.empty() && p.chars()[0] == replacement;
    const bool at_text_start = !p.empty() && p.alignment(0).begin == 0;
    if (!starts_with_replacement && (scheme == Prepend::kAlways || (scheme == Prepend::kFirst && at_text_start))) {
      prepend(p, std::u32string(1, replacement));
    }
    if (split) {
      split_at_matches(p, char_matches(p.chars(), [&](char32_t c) { return c == replacement; }),
                       SplitBehavior::kMergedWithNext, false, words);
    } else if (!p.empty()) {
      words.push_back(std::move(p));
    }
  }
};

// Whitespace: words of \w+ or runs of [^\w\s]+, whitespace dropped. WhitespaceSplit: cut at
// whitespace only.
class WhitespacePreTokenizer final : public PreTokenizer {
 public:
  bool split_only = false;
  Regex regex{R"(\w+|[^\w\s]+)"};
  void pre_tokenize(const NormalizedString& piece, std::vector<NormalizedString>& words) const override {
    if (split_only) {
      split_at_matches(piece, char_matches(piece.chars(), unicode::is_whitespace), SplitBehavior::kRemoved, false,
                       words);
    } else {
      split_at_matches(piece, regex.find_all(piece.chars()), SplitBehavior::kRemoved, true, words);
    }
  }
};

}  // namespace

// ------------------------------------------------------------------ readers

std::unique_ptr<PreTokenizer> read_sequence_pre_tokenizer(const nlohmann::json& spec, const std::string& path) {
  auto seq = std::make_unique<SequencePreTokenizer>();
  for (const nlohmann::json& step : spec.at("pretokenizers")) {
    if (!step.is_null()) seq->steps.push_back(read_pre_tokenizer(step, path));
  }
  return seq;
}

std::unique_ptr<PreTokenizer> read_byte_level_pre_tokenizer(const nlohmann::json& spec, const std::string&) {
  auto p = std::make_unique<ByteLevelPreTokenizer>();
  p->add_prefix_space = spec.value("add_prefix_space", false);
  p->use_regex = spec.value("use_regex", true);
  return p;
}

std::unique_ptr<PreTokenizer> read_split_pre_tokenizer(const nlohmann::json& spec, const std::string& path) {
  auto p = std::make_unique<SplitPreTokenizer>();
  read_pattern(spec.at("pattern"), path, p->literal, p->regex);
  p->behavior = parse_split_behavior(spec.value("behavior", std::string("Isolated")), path);
  p->invert = spec.value("invert", false);
  return p;
}

std::unique_ptr<PreTokenizer> read_digits_pre_tokenizer(const nlohmann::json& spec, const std::string&) {
  auto p = std::make_unique<DigitsPreTokenizer>();
  p->individual_digits = spec.value("individual_digits", false);
  return p;
}

std::unique_ptr<PreTokenizer> read_metaspace_pre_tokenizer(const nlohmann::json& spec, const std::string& path) {
  auto p = std::make_unique<MetaspacePreTokenizer>();
  const std::u32string rep = unicode::decode_utf8(spec.value("replacement", std::string("\u2581")), path).chars;
  if (rep.size() != 1) throw Error(path + ": the Metaspace replacement must be one character");
  p->replacement = rep[0];
  p->split = spec.value("split", true);
  std::string scheme = spec.value("prepend_scheme", std::string());
  if (scheme.empty()) scheme = spec.value("add_prefix_space", true) ? "always" : "never";  // files before 0.19
  if (scheme == "always") {
    p->scheme = MetaspacePreTokenizer::Prepend::kAlways;
  } else if (scheme == "first") {
    p->scheme = MetaspacePreTokenizer::Prepend::kFirst;
  } else if (scheme == "never") {
    p->scheme = MetaspacePreTokenizer::Prepend::kNever;
  } else {
    throw Error(path + ": unknown Metaspace prepend_scheme '" + scheme + "' (expected always, first or never)");
  }
  return p;
}

std::unique_ptr<PreTokenizer> read_whitespace_pre_tokenizer(const nlohmann::json&, const std::string&) {
  return std::make_unique<WhitespacePreTokenizer>();
}

std::unique_ptr<PreTokenizer> read_whitespace_split_pre_tokenizer(const nlohmann::json&, const std::string&) {
  auto p = std::make_unique<WhitespacePreTokenizer>();
  p->split_only = true;
  return p;
}

}  // namespace headscope::tokenizer
