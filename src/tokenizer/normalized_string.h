// headscope — a piece of text being normalized, that remembers where each of its characters came
// from in the original input.
//
// Normalizers rewrite text (drop control characters, decompose accents, lowercase, add spaces
// around CJK ideographs), yet every token must point back at the bytes of the ORIGINAL text. As in
// the Hugging Face `tokenizers` library (tokenizers/src/tokenizer/normalizer.rs, NormalizedString),
// every normalized character carries an alignment: the byte span [begin, end) of the original
// character(s) it stands for. Edits go through transform(), which receives the new characters each
// tagged with a change code and derives the new alignments exactly as the library does, so that our
// token offsets agree with it character for character.
#pragma once
#include <cstdint>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "headscope/limits.h"
#include "tokenizer/unicode.h"

namespace headscope::tokenizer {

// A byte span in the original text, [begin, end).
struct Span {
  int64_t begin = 0;
  int64_t end = 0;
  bool operator==(const Span&) const = default;
};

// One character of a transform(): `change` is 0 when the character replaces the next old
// character, 1 when it is inserted, and -N when it replaces the next old character and the N old
// characters after it are dropped (the library's convention).
struct CharChange {
  char32_t c;
  int change;
};

class NormalizedString {
 public:
  NormalizedString() = default;
  // The original characters [first, last) of `text`, not yet normalized.
  NormalizedString(const unicode::DecodedText& text, size_t first, size_t last);

  const std::u32string& chars() const { return chars_; }
  size_t size() const { return chars_.size(); }
  bool empty() const { return chars_.empty(); }
  std::string utf8() const { return unicode::to_utf8(chars_); }
  // The most characters this string (and any list of words cut from it) may grow to:
  // kMaxNormalizedGrowth per character of the input it was made from, plus kMaxNormalizedSlack, and
  // at most kMaxNormalizedChars (limits.h). Slices keep the limit of the text they come from.
  size_t max_size() const { return max_size_; }
  // Throws ResourceError when `n` characters would exceed max_size(); `what` names the step.
  void check_size(size_t n, const char* what) const;
  // Original span of character i.
  const Span& alignment(size_t i) const { return align_[i]; }

  // Original span covered by normalized characters [first, last) (first < last): from the start of
  // the first character's span to the end of the last one's, as the library computes it.
  Span original_span(size_t first, size_t last) const;

  // Replaces the characters with `dest`; the first `initial_removed` old characters are dropped.
  // Throws ResourceError when `dest` is longer than max_size().
  void transform(const std::vector<CharChange>& dest, size_t initial_removed);

  // Replaces the characters and their alignments at once (one span per character), for edits that
  // work out alignments themselves (replace_matches). Throws ResourceError past max_size().
  void assign(std::u32string chars, std::vector<Span> align);
  // The original span an insertion at character `pos` takes: that of the character before it, or
  // the empty span where this string starts.
  Span span_before(size_t pos) const;

  // Keeps the characters for which keep(c) is true.
  void filter(const std::function<bool(char32_t)>& keep);
  // Replaces every character by map(c).
  void map(const std::function<char32_t(char32_t)>& map);
  // Full lowercasing, one character at a time (see unicode::append_lowercase).
  void lowercase();
  // Canonical decomposition with canonical reordering of combining marks (NFD).
  void nfd();

  // The characters [first, last) as their own NormalizedString, alignments kept.
  NormalizedString slice(size_t first, size_t last) const;

  // Splits at every character for which is_delimiter(c) is true. The delimiters are dropped
  // (kRemoved) or kept as one-character pieces (kIsolated). Empty pieces are not returned.
  enum class Delimiter { kRemoved, kIsolated };
  void split(const std::function<bool(char32_t)>& is_delimiter, Delimiter behavior,
             std::vector<NormalizedString>& out) const;

 private:
  std::u32string chars_;
  std::vector<Span> align_;  // [chars_.size()]: original span of each character
  // Original byte offset where this string starts: characters inserted before the first one are
  // aligned to the empty span here.
  int64_t origin_ = 0;
  size_t max_size_ = static_cast<size_t>(limits::kMaxNormalizedChars);
};

// ---- edits that the normalizers and pre-tokenizers share (NormalizedString::split, prepend and
// replace in tokenizers/src/tokenizer/normalizer.rs) ----

// How a split keeps the matches (tokenizers' SplitDelimiterBehavior).
enum class SplitBehavior { kRemoved, kIsolated, kMergedWithPrevious, kMergedWithNext, kContiguous };
SplitBehavior parse_split_behavior(const std::string& name, const std::string& where);

// Cuts `piece` at `matches` (sorted, non-overlapping character ranges) and appends the non-empty
// pieces to `out` (tokenizers' NormalizedString::split).
void split_at_matches(const NormalizedString& piece, const std::vector<std::pair<size_t, size_t>>& matches,
                      SplitBehavior behavior, bool invert, std::vector<NormalizedString>& out);

// Inserts `prefix` before the first character, aligned to that character's original span
// (NormalizedString::prepend in tokenizers). No effect on an empty string.
void prepend(NormalizedString& s, const std::u32string& prefix);

// Replaces each match (sorted, non-overlapping character ranges) by `content`: the matched
// characters are removed and the content inserted, every content character aligned to the last
// matched character (NormalizedString::replace in tokenizers: "x  y" with "  " -> " " keeps the
// second space's span).
void replace_matches(NormalizedString& s, const std::vector<std::pair<size_t, size_t>>& matches,
                     const std::u32string& content);

}  // namespace headscope::tokenizer
