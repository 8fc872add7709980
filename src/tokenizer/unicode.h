// headscope — Unicode helpers shared by the tokenizers (WordPiece, BPE).
//
// Two kinds of helpers live here:
//   - UTF-8 decoding/encoding with strict validation (the same rules as Rust's str: no overlong
//     forms, no surrogates, nothing above U+10FFFF), so that every tokenizer rejects the same
//     inputs with an error naming the byte offset.
//   - character properties as the Hugging Face `tokenizers` library sees them. That library is our
//     oracle, and it does not use one Unicode version throughout: general categories come from the
//     `unicode_categories` crate (Unicode 8.0 tables), canonical decomposition and combining classes
//     from `unicode-normalization-alignments` (Unicode 9.0 tables), and whitespace / lowercasing from
//     Rust's standard library (current Unicode). We take every property from ICU and reproduce the
//     older views by ignoring characters ICU reports as assigned after that version (u_charAge).
#pragma once
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace headscope::unicode {

// A UTF-8 text decoded into code points. byte_offsets[i] is where chars[i] starts in the
// original bytes; byte_offsets has one extra entry, the total byte length.
struct DecodedText {
  std::u32string chars;               // [n_chars]
  std::vector<int64_t> byte_offsets;  // [n_chars + 1]
};

// Decodes `text` strictly. On the first invalid sequence throws Error
// "<what> is not valid UTF-8: <reason> at byte offset N".
DecodedText decode_utf8(std::string_view text, std::string_view what = "text");

// Byte offset of the first invalid UTF-8 sequence in `text`, or -1 when it is valid.
int64_t find_invalid_utf8(std::string_view text);

// Number of bytes `cp` takes in UTF-8 (1..4).
int utf8_length(char32_t cp);
void append_utf8(char32_t cp, std::string& out);
std::string to_utf8(std::u32string_view chars);

// White_Space property; Rust's char::is_whitespace.
bool is_whitespace(char32_t cp);

// General-category tests as the `unicode_categories` crate answers them (Unicode 8.0).
bool is_legacy_other(char32_t cp);            // Cc, Cf or Co
bool is_legacy_punctuation(char32_t cp);      // Pc, Pd, Ps, Pe, Pi, Pf, Po
bool is_legacy_nonspacing_mark(char32_t cp);  // Mn

// Rust's char::is_ascii_punctuation: the 32 printable ASCII symbols that are not letters or digits.
bool is_ascii_punctuation(char32_t cp);

// Appends the full, context-free lowercase mapping of `cp` (Rust's char::to_lowercase: İ becomes
// "i̇", Σ always becomes σ). Most characters map to one character, a few to two or three. Case
// pairs newer than the ICU in use (Unicode 16/17 letters) come from a short table in unicode.cc.
void append_lowercase(char32_t cp, std::u32string& out);

// Appends the full canonical decomposition of `cp` (NFD of the single character, not reordered),
// as the Unicode 9.0 tables define it; characters assigned later are left as they are.
void append_canonical_decomposition(char32_t cp, std::u32string& out);

// Canonical combining class, as the Unicode 9.0 tables define it (0 for later characters).
uint8_t canonical_combining_class(char32_t cp);

// Regex classes as Rust's `regex` crate defines them, used by added-token matching:
// \w = Alphabetic | Mark | Decimal_Number | Connector_Punctuation | Join_Control; \s = White_Space.
bool is_regex_word(char32_t cp);

// End of the extended grapheme cluster that starts at chars[first] (first < chars.size()), by the
// rules of UAX #29 as the `unicode-segmentation` crate applies them (str::graphemes(true)), with
// ICU's Grapheme_Cluster_Break and Extended_Pictographic properties. Not applied: GB9c (Indic
// conjuncts; ICU 72 has no InCB property). Its clusters are 9 bytes or more, and the one user,
// the Precompiled normalizer, treats clusters of 6 bytes or more character by character anyway.
size_t grapheme_end(std::u32string_view chars, size_t first);

}  // namespace headscope::unicode
