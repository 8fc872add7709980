// headscope — what the split and replace steps of a tokenizer.json look for: a compiled regular
// expression (ICU, standing in for the Oniguruma regexes of tokenizers/src/utils/onig.rs), a
// literal string, or a character predicate; each gives its matches as character ranges.
// tokenizers uses Oniguruma, whose \s / \S are the Unicode White_Space property; ICU's \s is
// narrower ([\t\n\f\r\p{Z}], no U+000B or U+0085), so patterns are rewritten to \p{White_Space}
// before compiling.
#pragma once
#include <memory>
#include <nlohmann/json_fwd.hpp>
#include <string>
#include <utility>
#include <vector>

namespace headscope::tokenizer {

// A compiled regular expression (ICU), matched against code points.
class Regex {
 public:
  explicit Regex(const std::string& pattern);  // throws Error naming the pattern
  ~Regex();
  Regex(const Regex&) = delete;
  Regex& operator=(const Regex&) = delete;
  // Non-overlapping matches, left to right, as [begin, end) character index pairs.
  std::vector<std::pair<size_t, size_t>> find_all(const std::u32string& text) const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// Every occurrence of `needle` in `text`, left to right, not overlapping; none for an empty needle.
std::vector<std::pair<size_t, size_t>> literal_matches(const std::u32string& text, const std::u32string& needle);

// Every single character of `text` for which `predicate` holds.
std::vector<std::pair<size_t, size_t>> char_matches(const std::u32string& text, const auto& predicate) {
  std::vector<std::pair<size_t, size_t>> matches;
  for (size_t i = 0; i < text.size(); ++i) {
    if (predicate(text[i])) matches.emplace_back(i, i + 1);
  }
  return matches;
}

// A tokenizer.json pattern, {"String": "..."} (into `literal`) or {"Regex": "..."} (into `regex`);
// throws Error naming `path` otherwise.
void read_pattern(const nlohmann::json& pattern, const std::string& path, std::u32string& literal,
                  std::unique_ptr<Regex>& regex);

}  // namespace headscope::tokenizer
