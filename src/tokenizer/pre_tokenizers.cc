// headscope — BPE normalizers and pre-tokenizers, following tokenizers/src/pre_tokenizers/*.rs,
// tokenizers/src/normalizers/*.rs and NormalizedString::split (tokenizers/src/tokenizer/normalizer.rs).
#include "tokenizer/pre_tokenizers.h"

#include <unicode/regex.h>
#include <unicode/uchar.h>
#include <unicode/unistr.h>

#include <algorithm>
#include <array>

#include "headscope/error.h"
#include "headscope/limits.h"
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

// ------------------------------------------------------------------ regex (ICU)

struct Regex::Impl {
  std::string source;
  std::unique_ptr<icu::RegexPattern> pattern;
};

namespace {

// Oniguruma's \s and \S mean the White_Space property; ICU's are narrower. Rewrites them, leaving
// every other escape (and an escaped backslash) as it is.
std::string to_icu_syntax(const std::string& pattern) {
  std::string out;
  out.reserve(pattern.size() + 32);
  for (size_t i = 0; i < pattern.size(); ++i) {
    if (pattern[i] == '\\' && i + 1 < pattern.size()) {
      const char next = pattern[i + 1];
      if (next == 's') {
        out += "\\p{White_Space}";
      } else if (next == 'S') {
        out += "\\P{White_Space}";
      } else {
        out += pattern[i];
        out += next;
      }
      ++i;
    } else {
      out += pattern[i];
    }
  }
  return out;
}

}  // namespace

Regex::Regex(const std::string& pattern) : impl_(std::make_unique<Impl>()) {
  impl_->source = pattern;
  UErrorCode status = U_ZERO_ERROR;
  UParseError parse_error;
  impl_->pattern.reset(
      icu::RegexPattern::compile(icu::UnicodeString::fromUTF8(to_icu_syntax(pattern)), 0, parse_error, status));
  if (U_FAILURE(status)) {
    throw Error("tokenizer: cannot compile the split regex \"" + pattern + "\": " + u_errorName(status) +
                " at offset " + std::to_string(parse_error.offset));
  }
}

Regex::~Regex() = default;

std::vector<std::pair<size_t, size_t>> Regex::find_all(const std::u32string& text) const {
  std::vector<std::pair<size_t, size_t>> matches;
  if (text.empty()) return matches;
  // ICU matches UTF-16; unit_to_char maps a UTF-16 index back to a code-point index.
  icu::UnicodeString input = icu::UnicodeString::fromUTF32(reinterpret_cast<const UChar32*>(text.data()),
                                                           static_cast<int32_t>(text.size()));
  std::vector<uint32_t> unit_to_char(static_cast<size_t>(input.length()) + 1);
  size_t unit = 0;
  for (size_t i = 0; i < text.size(); ++i) {
    unit_to_char[unit++] = static_cast<uint32_t>(i);
    if (text[i] > 0xFFFF) unit_to_char[unit++] = static_cast<uint32_t>(i);
  }
  unit_to_char[unit] = static_cast<uint32_t>(text.size());
  UErrorCode status = U_ZERO_ERROR;
  std::unique_ptr<icu::RegexMatcher> matcher(impl_->pattern->matcher(input, status));
  // A pattern from tokenizer.json may backtrack exponentially ("(a+)+b"). ICU calls back once per
  // TIMER_INITIAL_VALUE (10,000) saved backtracking states; the whole text gets a number of such
  // ticks proportional to its length (limits.h), after which the match stops with an error.
  struct Ticks {
    int64_t used = 0;
    int64_t limit = 0;
  } ticks{0, std::max(limits::kMinRegexTicks, static_cast<int64_t>(text.size()) * limits::kMaxRegexTicksPerChar)};
  const URegexMatchCallback* on_tick = [](const void* context, int32_t) -> UBool {
    Ticks* t = const_cast<Ticks*>(static_cast<const Ticks*>(context));
    return ++t->used <= t->limit;
  };
  if (U_SUCCESS(status)) matcher->setMatchCallback(on_tick, &ticks, status);
  while (U_SUCCESS(status) && matcher->find(status)) {
    const int32_t begin = matcher->start(status);
    const int32_t end = matcher->end(status);
    if (U_FAILURE(status)) break;
    if (begin == end) continue;  // an empty match cuts nothing
    matches.emplace_back(unit_to_char[static_cast<size_t>(begin)], unit_to_char[static_cast<size_t>(end)]);
  }
  if (status == U_REGEX_STOPPED_BY_CALLER) {
    throw ResourceError("tokenizer: regex \"" + impl_->source + "\" backtracks too much on a text of " +
                        std::to_string(text.size()) + " characters (more than " + std::to_string(ticks.limit) +
                        " ticks of ICU's matcher, kMaxRegexTicksPerChar); the tokenizer's pattern is pathological");
  }
  if (U_FAILURE(status)) {
    throw Error("tokenizer: regex \"" + impl_->source + "\" failed: " + u_errorName(status));
  }
  return matches;
}

// ------------------------------------------------------------------ splitting

SplitBehavior parse_split_behavior(const std::string& name, const std::string& where) {
  if (name == "Removed") return SplitBehavior::kRemoved;
  if (name == "Isolated") return SplitBehavior::kIsolated;
  if (name == "MergedWithPrevious") return SplitBehavior::kMergedWithPrevious;
  if (name == "MergedWithNext") return SplitBehavior::kMergedWithNext;
  if (name == "Contiguous") return SplitBehavior::kContiguous;
  throw Error(where + ": unknown split behavior \"" + name + "\"");
}

void split_at_matches(const NormalizedString& piece, const std::vector<std::pair<size_t, size_t>>& matches,
                      SplitBehavior behavior, bool invert, std::vector<NormalizedString>& out) {
  // Segments cover the whole piece: the matches and the gaps between them, each flagged.
  struct Segment {
    size_t begin, end;
    bool is_match;
  };
  std::vector<Segment> segments;
  size_t prev = 0;
  for (const auto& [b, e] : matches) {
    if (prev < b) segments.push_back({prev, b, invert});
    segments.push_back({b, e, !invert});
    prev = e;
  }
  if (prev < piece.size()) segments.push_back({prev, piece.size(), invert});

  // Then group them as the behaviour says; `keep` is false only for removed matches.
  struct Part {
    size_t begin, end;
    bool keep;
  };
  std::vector<Part> parts;
  bool previous_match = false;
  switch (behavior) {
    case SplitBehavior::kIsolated:
      for (const Segment& s : segments) parts.push_back({s.begin, s.end, true});
      break;
    case SplitBehavior::kRemoved:
      for (const Segment& s : segments) parts.push_back({s.begin, s.end, !s.is_match});
      break;
    case SplitBehavior::kContiguous:
      for (const Segment& s : segments) {
        if (s.is_match == previous_match && !parts.empty()) {
          parts.back().end = s.end;
        } else {
          parts.push_back({s.begin, s.end, true});
        }
        previous_match = s.is_match;
      }
      break;
    case SplitBehavior::kMergedWithPrevious:
      for (const Segment& s : segments) {
        if (s.is_match && !previous_match && !parts.empty()) {
          parts.back().end = s.end;
        } else {
          parts.push_back({s.begin, s.end, true});
        }
        previous_match = s.is_match;
      }
      break;
    case SplitBehavior::kMergedWithNext:
      for (size_t i = segments.size(); i-- > 0;) {
        const Segment& s = segments[i];
        if (s.is_match && !previous_match && !parts.empty()) {
          parts.back().begin = s.begin;
        } else {
          parts.push_back({s.begin, s.end, true});
        }
        previous_match = s.is_match;
      }
      std::reverse(parts.begin(), parts.end());
      break;
  }
  for (const Part& p : parts) {
    if (p.keep && p.begin < p.end) out.push_back(piece.slice(p.begin, p.end));
  }
}

namespace {

std::vector<std::pair<size_t, size_t>> char_matches(const std::u32string& text, const auto& predicate) {
  std::vector<std::pair<size_t, size_t>> matches;
  for (size_t i = 0; i < text.size(); ++i) {
    if (predicate(text[i])) matches.emplace_back(i, i + 1);
  }
  return matches;
}

std::vector<std::pair<size_t, size_t>> literal_matches(const std::u32string& text, const std::u32string& needle) {
  std::vector<std::pair<size_t, size_t>> matches;
  if (needle.empty()) return matches;
  for (size_t pos = text.find(needle); pos != std::u32string::npos; pos = text.find(needle, pos + needle.size())) {
    matches.emplace_back(pos, pos + needle.size());
  }
  return matches;
}

std::u32string to_u32(const std::string& utf8, const std::string& where) {
  return unicode::decode_utf8(utf8, where).chars;
}

// Rust's char::is_numeric: general category Nd, Nl or No.
bool is_numeric(char32_t c) {
  const int8_t type = u_charType(static_cast<UChar32>(c));
  return type == U_DECIMAL_DIGIT_NUMBER || type == U_LETTER_NUMBER || type == U_OTHER_NUMBER;
}

}  // namespace

void prepend(NormalizedString& s, const std::u32string& prefix) {
  if (s.empty() || prefix.empty()) return;
  s.check_size(s.size() + prefix.size(), "a prepended prefix");
  // The first prefix character takes over the first character's alignment (change 0); the rest of
  // the prefix and the old first character are insertions aligned to it.
  std::vector<CharChange> dest;
  dest.reserve(s.size() + prefix.size());
  for (size_t i = 0; i < prefix.size(); ++i) dest.push_back({prefix[i], i == 0 ? 0 : 1});
  dest.push_back({s.chars()[0], 1});
  for (size_t i = 1; i < s.size(); ++i) dest.push_back({s.chars()[i], 0});
  s.transform(dest, 0);
}

namespace {

// Replaces each match by `content`: replaced characters keep their alignment one for one; extra
// content characters are insertions; surplus matched characters are dropped.
void replace_matches(NormalizedString& s, const std::vector<std::pair<size_t, size_t>>& matches,
                     const std::u32string& content) {
  if (matches.empty()) return;
  size_t matched = 0;
  for (const auto& [b, e] : matches) matched += e - b;
  // Checked before building: one Replace can multiply the text by the length of its content.
  s.check_size(s.size() - matched + matches.size() * content.size(), "a Replace normalizer");
  std::vector<CharChange> dest;
  dest.reserve(s.size() + matches.size() * content.size());
  size_t initial_removed = 0;
  size_t i = 0;
  const auto drop = [&](size_t n) {
    if (n == 0) return;
    if (dest.empty()) {
      initial_removed += n;
    } else {
      dest.back().change -= static_cast<int>(n);
    }
  };
  for (const auto& [b, e] : matches) {
    for (; i < b; ++i) dest.push_back({s.chars()[i], 0});
    const size_t n = e - b;
    const size_t m = content.size();
    for (size_t j = 0; j < m; ++j) dest.push_back({content[j], j < n ? 0 : 1});
    if (m < n) drop(n - m);
    i = e;
  }
  for (; i < s.size(); ++i) dest.push_back({s.chars()[i], 0});
  s.transform(dest, initial_removed);
}


// ------------------------------------------------------------------ normalizers

class SequenceNormalizer final : public Normalizer {
 public:
  std::vector<std::unique_ptr<Normalizer>> steps;
  void normalize(NormalizedString& s) const override {
    for (const auto& step : steps) step->normalize(s);
  }
};

class PrependNormalizer final : public Normalizer {
 public:
  std::u32string prefix;
  void normalize(NormalizedString& s) const override { prepend(s, prefix); }
};

class ReplaceNormalizer final : public Normalizer {
 public:
  std::u32string literal;        // when the pattern is {"String": ...}
  std::unique_ptr<Regex> regex;  // when it is {"Regex": ...}
  std::u32string content;
  void normalize(NormalizedString& s) const override {
    replace_matches(s, regex ? regex->find_all(s.chars()) : literal_matches(s.chars(), literal), content);
  }
};

class NfdNormalizer final : public Normalizer {
 public:
  void normalize(NormalizedString& s) const override { s.nfd(); }
};

class LowercaseNormalizer final : public Normalizer {
 public:
  void normalize(NormalizedString& s) const override { s.lowercase(); }
};

// tokenizer.json patterns are {"String": "..."} or {"Regex": "..."}.
void read_pattern(const nlohmann::json& pattern, const std::string& path, std::u32string& literal,
                  std::unique_ptr<Regex>& regex) {
  if (pattern.contains("String")) {
    literal = to_u32(pattern.at("String").get<std::string>(), path);
  } else if (pattern.contains("Regex")) {
    regex = std::make_unique<Regex>(pattern.at("Regex").get<std::string>());
  } else {
    throw Error(path + ": a split/replace pattern must be {\"String\": ...} or {\"Regex\": ...}");
  }
}

// ------------------------------------------------------------------ pre-tokenizers

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
    split_at_matches(piece, regex ? regex->find_all(piece.chars()) : literal_matches(piece.chars(), literal),
                     behavior, invert, words);
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

std::unique_ptr<Normalizer> read_sequence_normalizer(const nlohmann::json& spec, const std::string& path) {
  auto seq = std::make_unique<SequenceNormalizer>();
  for (const nlohmann::json& step : spec.at("normalizers")) {
    if (!step.is_null()) seq->steps.push_back(read_normalizer(step, path));
  }
  return seq;
}

std::unique_ptr<Normalizer> read_prepend_normalizer(const nlohmann::json& spec, const std::string& path) {
  auto n = std::make_unique<PrependNormalizer>();
  n->prefix = to_u32(spec.at("prepend").get<std::string>(), path);
  return n;
}

std::unique_ptr<Normalizer> read_replace_normalizer(const nlohmann::json& spec, const std::string& path) {
  auto n = std::make_unique<ReplaceNormalizer>();
  read_pattern(spec.at("pattern"), path, n->literal, n->regex);
  n->content = to_u32(spec.at("content").get<std::string>(), path);
  return n;
}

std::unique_ptr<Normalizer> read_nfd_normalizer(const nlohmann::json&, const std::string&) {
  return std::make_unique<NfdNormalizer>();
}

std::unique_ptr<Normalizer> read_lowercase_normalizer(const nlohmann::json&, const std::string&) {
  return std::make_unique<LowercaseNormalizer>();
}

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
  const std::u32string rep = to_u32(spec.value("replacement", std::string("\u2581")), path);
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

PostProcessor read_byte_level_processing(const nlohmann::json& spec, const std::string&) {
  PostProcessor out;
  out.trim_offsets = spec.value("trim_offsets", true);
  out.trim_keeps_prefix_space = spec.value("add_prefix_space", true);
  return out;
}

PostProcessor read_sequence_processing(const nlohmann::json& spec, const std::string& path) {
  // Only two effects exist in the processors we read: offset trimming and a template. They commute
  // (the template's special tokens have empty spans), so their union is the sequence.
  PostProcessor out;
  for (const nlohmann::json& step : spec.at("processors")) {
    if (step.is_null()) continue;
    PostProcessor p = read_post_processor(step, path);
    if (p.trim_offsets) {
      out.trim_offsets = true;
      out.trim_keeps_prefix_space = p.trim_keeps_prefix_space;
    }
    if (!p.single.empty()) {
      if (!out.single.empty()) throw Error(path + ": post_processor Sequence has two templates");
      out.single = std::move(p.single);
    }
  }
  return out;
}

PostProcessor read_roberta_processing(const nlohmann::json& spec, const std::string& path) {
  // {"sep": ["</s>", 2], "cls": ["<s>", 0], "trim_offsets": true, "add_prefix_space": true}
  PostProcessor out = read_bert_processing(spec, path);
  out.trim_offsets = spec.value("trim_offsets", true);
  out.trim_keeps_prefix_space = spec.value("add_prefix_space", true);
  return out;
}

void trim_byte_level_offsets(std::string_view text, std::vector<Token>& tokens, bool keeps_prefix_space) {
  constexpr char32_t kSpaceChar = U'\u0120';  // 'Ġ', the byte-level character of ' '
  const auto is_char_start = [&](int64_t b) {
    return b >= static_cast<int64_t>(text.size()) || (static_cast<unsigned char>(text[static_cast<size_t>(b)]) & 0xC0) != 0x80;
  };
  const auto forward = [&](int64_t b, int64_t chars) {  // `chars` characters after byte b
    for (; chars > 0 && b < static_cast<int64_t>(text.size()); --chars) {
      ++b;
      while (!is_char_start(b)) ++b;
    }
    return b;
  };
  const auto backward = [&](int64_t b, int64_t chars) {  // `chars` characters before byte b
    for (; chars > 0 && b > 0; --chars) {
      --b;
      while (b > 0 && !is_char_start(b)) --b;
    }
    return b;
  };
  // Whether at least `n` characters start before byte b: walks back at most n characters, so a
  // text of many space tokens stays linear (counting from the start was quadratic).
  const auto has_chars_before = [&](int64_t b, int64_t n) {
    for (int64_t i = b - 1; i >= 0 && n > 0; --i) n -= is_char_start(i);
    return n <= 0;
  };
  std::u32string chars;
  for (size_t i = 0; i < tokens.size(); ++i) {
    Token& t = tokens[i];
    chars = unicode::decode_utf8(t.text, "token").chars;
    const auto is_space = [&](char32_t c) { return c == kSpaceChar || unicode::is_whitespace(c); };
    int64_t leading = 0, trailing = 0;
    while (leading < static_cast<int64_t>(chars.size()) && is_space(chars[static_cast<size_t>(leading)])) ++leading;
    while (trailing < static_cast<int64_t>(chars.size()) && is_space(chars[chars.size() - 1 - static_cast<size_t>(trailing)])) {
      ++trailing;
    }
    if (leading > 0) {
      // The space added by add_prefix_space in front of the text is part of the first token.
      const bool is_first = i == 0 || t.begin == 0;
      if (is_first && keeps_prefix_space && leading == 1) leading = 0;
      t.begin = std::min(forward(t.begin, leading), t.end);
    }
    if (trailing > 0 && has_chars_before(t.end, trailing)) t.end = std::max(backward(t.end, trailing), t.begin);
  }
}

}  // namespace headscope::tokenizer
