// headscope — regular expressions (ICU) and literal patterns; see pattern.h.
#include "tokenizer/pattern.h"

#include <unicode/regex.h>
#include <unicode/unistr.h>

#include <algorithm>
#include <nlohmann/json.hpp>

#include "headscope/error.h"
#include "headscope/limits.h"
#include "tokenizer/unicode.h"

namespace headscope::tokenizer {

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
  icu::UnicodeString input =
      icu::UnicodeString::fromUTF32(reinterpret_cast<const UChar32*>(text.data()), static_cast<int32_t>(text.size()));
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

std::vector<std::pair<size_t, size_t>> literal_matches(const std::u32string& text, const std::u32string& needle) {
  std::vector<std::pair<size_t, size_t>> matches;
  if (needle.empty()) return matches;
  for (size_t pos = text.find(needle); pos != std::u32string::npos; pos = text.find(needle, pos + needle.size())) {
    matches.emplace_back(pos, pos + needle.size());
  }
  return matches;
}

// tokenizer.json patterns are {"String": "..."} or {"Regex": "..."}.
void read_pattern(const nlohmann::json& pattern, const std::string& path, std::u32string& literal,
                  std::unique_ptr<Regex>& regex) {
  if (pattern.contains("String")) {
    literal = unicode::decode_utf8(pattern.at("String").get<std::string>(), path).chars;
  } else if (pattern.contains("Regex")) {
    regex = std::make_unique<Regex>(pattern.at("Regex").get<std::string>());
  } else {
    throw Error(path + ": a split/replace pattern must be {\"String\": ...} or {\"Regex\": ...}");
  }
}

}  // namespace headscope::tokenizer
