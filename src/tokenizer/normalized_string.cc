// headscope — NormalizedString: alignment-tracking text edits, following
// tokenizers/src/tokenizer/normalizer.rs (transform_range, filter, lowercase, nfd, split, prepend,
// replace).
#include "tokenizer/normalized_string.h"

#include <algorithm>
#include <tuple>

#include "headscope/error.h"

namespace headscope::tokenizer {

NormalizedString::NormalizedString(const unicode::DecodedText& text, size_t first, size_t last)
    : chars_(text.chars.substr(first, last - first)), origin_(text.byte_offsets[first]) {
  const int64_t n = static_cast<int64_t>(last - first);
  max_size_ = static_cast<size_t>(
      std::min(limits::kMaxNormalizedChars, n * limits::kMaxNormalizedGrowth + limits::kMaxNormalizedSlack));
  align_.reserve(last - first);
  for (size_t i = first; i < last; ++i) align_.push_back({text.byte_offsets[i], text.byte_offsets[i + 1]});
}

void NormalizedString::check_size(size_t n, const char* what) const {
  if (n <= max_size_) return;
  throw ResourceError(std::string(what) + " would make the text " + std::to_string(n) +
                      " characters long, more than the " + std::to_string(max_size_) + " allowed for this input (" +
                      std::to_string(limits::kMaxNormalizedGrowth) + " per input character, at most " +
                      std::to_string(limits::kMaxNormalizedChars) +
                      "); the tokenizer's normalizer or pre-tokenizer multiplies the text");
}

Span NormalizedString::original_span(size_t first, size_t last) const {
  return {align_[first].begin, align_[last - 1].end};
}

void NormalizedString::transform(const std::vector<CharChange>& dest, size_t initial_removed) {
  // Walk the old characters in step with `dest`: a replacing character takes the alignment of the
  // old character it replaces; an inserted one takes the alignment of the old character just
  // before the current position (or the empty span at the start).
  check_size(dest.size(), "normalization");
  std::u32string chars;
  std::vector<Span> align;
  chars.reserve(dest.size());
  align.reserve(dest.size());
  size_t pos = initial_removed;
  const size_t n_old = align_.size();
  const Span at_origin{origin_, origin_};
  for (const CharChange& d : dest) {
    Span a;
    if (d.change > 0) {
      a = pos == 0 ? at_origin : align_[std::min(pos, n_old) - 1];
    } else {
      a = pos < n_old ? align_[pos] : (n_old ? Span{align_[n_old - 1].end, align_[n_old - 1].end} : at_origin);
      pos += 1;
      if (d.change < 0) pos += static_cast<size_t>(-d.change);
    }
    chars.push_back(d.c);
    align.push_back(a);
  }
  chars_ = std::move(chars);
  align_ = std::move(align);
}

void NormalizedString::assign(std::u32string chars, std::vector<Span> align) {
  check_size(chars.size(), "normalization");
  chars_ = std::move(chars);
  align_ = std::move(align);
}

Span NormalizedString::span_before(size_t pos) const {
  return pos == 0 ? Span{origin_, origin_} : align_[std::min(pos, align_.size()) - 1];
}

void NormalizedString::filter(const std::function<bool(char32_t)>& keep) {
  // A removed character is folded into the kept character before it (change -N); removed
  // characters at the very start are passed as initial_removed.
  std::vector<CharChange> dest;
  dest.reserve(chars_.size());
  int removed = 0;
  size_t removed_start = 0;
  bool have_last = false;
  char32_t last = 0;
  for (char32_t c : chars_) {
    if (keep(c)) {
      if (have_last) {
        dest.push_back({last, -removed});
      } else {
        removed_start = static_cast<size_t>(removed);
      }
      last = c;
      have_last = true;
      removed = 0;
    } else {
      ++removed;
    }
  }
  if (have_last) dest.push_back({last, -removed});
  transform(dest, removed_start);
}

void NormalizedString::map(const std::function<char32_t(char32_t)>& map) {
  for (char32_t& c : chars_) c = map(c);  // one for one: alignments are unchanged
}

void NormalizedString::lowercase() {
  std::vector<CharChange> dest;
  dest.reserve(chars_.size());
  std::u32string lower;
  for (char32_t c : chars_) {
    lower.clear();
    unicode::append_lowercase(c, lower);
    for (size_t i = 0; i < lower.size(); ++i) dest.push_back({lower[i], i == 0 ? 0 : 1});
  }
  transform(dest, 0);
}

void NormalizedString::nfd() {
  // Decompose each character (its first character replaces it, the others are inserted), then
  // put combining marks in canonical order: each run that starts at a starter (class 0) is
  // stably sorted by combining class. The change tags travel with the characters, as in the
  // unicode-normalization-alignments crate, and transform() then assigns alignments by position.
  struct Item {
    uint8_t ccc;
    char32_t c;
    int change;
  };
  std::vector<Item> items;
  items.reserve(chars_.size());
  std::u32string decomposed;
  for (char32_t c : chars_) {
    decomposed.clear();
    unicode::append_canonical_decomposition(c, decomposed);
    for (size_t i = 0; i < decomposed.size(); ++i) {
      items.push_back({unicode::canonical_combining_class(decomposed[i]), decomposed[i], i == 0 ? 0 : 1});
    }
  }
  size_t run_start = 0;
  const auto sort_run = [&](size_t end) {
    std::stable_sort(items.begin() + static_cast<std::ptrdiff_t>(run_start),
                     items.begin() + static_cast<std::ptrdiff_t>(end),
                     [](const Item& a, const Item& b) { return a.ccc < b.ccc; });
    run_start = end;
  };
  for (size_t i = 0; i < items.size(); ++i) {
    if (items[i].ccc == 0) sort_run(i);
  }
  sort_run(items.size());
  std::vector<CharChange> dest;
  dest.reserve(items.size());
  for (const Item& it : items) dest.push_back({it.c, it.change});
  transform(dest, 0);
}

NormalizedString NormalizedString::slice(size_t first, size_t last) const {
  NormalizedString out;
  out.chars_ = chars_.substr(first, last - first);
  out.align_.assign(align_.begin() + static_cast<std::ptrdiff_t>(first),
                    align_.begin() + static_cast<std::ptrdiff_t>(last));
  out.origin_ = first < last ? align_[first].begin : origin_;
  out.max_size_ = max_size_;
  return out;
}

void NormalizedString::split(const std::function<bool(char32_t)>& is_delimiter, Delimiter behavior,
                             std::vector<NormalizedString>& out) const {
  size_t start = 0;
  for (size_t i = 0; i < chars_.size(); ++i) {
    if (!is_delimiter(chars_[i])) continue;
    if (start < i) out.push_back(slice(start, i));
    if (behavior == Delimiter::kIsolated) out.push_back(slice(i, i + 1));
    start = i + 1;
  }
  if (start < chars_.size()) out.push_back(slice(start, chars_.size()));
}

// ---- shared edits ----

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

void replace_matches(NormalizedString& s, const std::vector<std::pair<size_t, size_t>>& matches,
                     const std::u32string& content) {
  if (matches.empty()) return;
  size_t matched = 0;
  for (const auto& [b, e] : matches) matched += e - b;
  // Checked before building: one Replace can multiply the text by the length of its content.
  s.check_size(s.size() - matched + matches.size() * content.size(), "a Replace normalizer");
  // The library replaces one match at a time (transform_range with the match removed first), so
  // every content character is an insertion after the match: it takes the span of the LAST matched
  // character. Untouched characters keep theirs.
  std::u32string chars;
  std::vector<Span> align;
  chars.reserve(s.size() - matched + matches.size() * content.size());
  align.reserve(chars.capacity());
  size_t i = 0;
  for (const auto& [b, e] : matches) {
    for (; i < b; ++i) {
      chars.push_back(s.chars()[i]);
      align.push_back(s.alignment(i));
    }
    const Span inserted = s.span_before(e);
    for (char32_t c : content) {
      chars.push_back(c);
      align.push_back(inserted);
    }
    i = e;
  }
  for (; i < s.size(); ++i) {
    chars.push_back(s.chars()[i]);
    align.push_back(s.alignment(i));
  }
  s.assign(std::move(chars), std::move(align));
}

}  // namespace headscope::tokenizer
