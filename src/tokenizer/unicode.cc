// headscope — Unicode helpers for the tokenizers; see unicode.h for why several Unicode versions
// coexist here.
#include "tokenizer/unicode.h"

#include <unicode/uchar.h>
#include <unicode/unorm2.h>
#include <unicode/ustring.h>
#include <unicode/utf16.h>

#include <cstdio>

#include "headscope/error.h"

namespace headscope::unicode {
namespace {

// ---- UTF-8 ----

struct Utf8Step {
  char32_t cp = 0;
  int length = 0;               // bytes consumed when valid
  const char* error = nullptr;  // reason when invalid
};

// Decodes one code point at text[pos] (pos < text.size()), following the well-formed byte
// sequences of Unicode §3.9, table 3-7 (which is what Rust's str accepts).
Utf8Step decode_one(std::string_view text, size_t pos) {
  const auto byte = [&](size_t i) { return static_cast<uint8_t>(text[i]); };
  const uint8_t b0 = byte(pos);
  if (b0 < 0x80) return {b0, 1, nullptr};
  int length = 0;
  uint8_t lo = 0x80, hi = 0xBF;  // allowed range of the second byte
  char32_t cp = 0;
  if (b0 >= 0xC2 && b0 <= 0xDF) {
    length = 2;
    cp = b0 & 0x1F;
  } else if (b0 >= 0xE0 && b0 <= 0xEF) {
    length = 3;
    cp = b0 & 0x0F;
    if (b0 == 0xE0) lo = 0xA0;  // shorter forms are overlong
    if (b0 == 0xED) hi = 0x9F;  // U+D800..U+DFFF are surrogates, not characters
  } else if (b0 >= 0xF0 && b0 <= 0xF4) {
    length = 4;
    cp = b0 & 0x07;
    if (b0 == 0xF0) lo = 0x90;  // overlong
    if (b0 == 0xF4) hi = 0x8F;  // above U+10FFFF
  } else if (b0 >= 0x80 && b0 <= 0xBF) {
    return {0, 0, "unexpected continuation byte"};
  } else if (b0 == 0xC0 || b0 == 0xC1) {
    return {0, 0, "overlong encoding"};
  } else {
    return {0, 0, "byte that never occurs in UTF-8"};
  }
  if (pos + length > text.size()) {
    // Distinguish "the text ends mid-character" from a bad byte inside the sequence.
    for (size_t i = pos + 1; i < text.size(); ++i) {
      const uint8_t b = byte(i);
      const bool ok = (i == pos + 1) ? (b >= lo && b <= hi) : (b >= 0x80 && b <= 0xBF);
      if (!ok) return {0, 0, "invalid sequence"};
    }
    return {0, 0, "truncated sequence"};
  }
  for (int i = 1; i < length; ++i) {
    const uint8_t b = byte(pos + i);
    const bool ok = (i == 1) ? (b >= lo && b <= hi) : (b >= 0x80 && b <= 0xBF);
    if (!ok) {
      if (i == 1 && b0 == 0xED && b >= 0xA0 && b <= 0xBF) return {0, 0, "encoded surrogate"};
      if (i == 1 && b0 == 0xF4 && b >= 0x90 && b <= 0xBF) return {0, 0, "code point above U+10FFFF"};
      if (i == 1 && (b0 == 0xE0 || b0 == 0xF0) && b >= 0x80 && b < lo) return {0, 0, "overlong encoding"};
      return {0, 0, "invalid sequence"};
    }
    cp = (cp << 6) | (b & 0x3F);
  }
  return {cp, length, nullptr};
}

// ---- Unicode versions ----

// True when ICU says `cp` was assigned in Unicode major.minor or earlier.
bool assigned_by(char32_t cp, uint8_t major, uint8_t minor) {
  UVersionInfo age;
  u_charAge(static_cast<UChar32>(cp), age);
  if (age[0] == 0) return false;  // unassigned (DerivedAge has no entry)
  return age[0] < major || (age[0] == major && age[1] <= minor);
}

// General category as the `unicode_categories` crate (tables generated from Unicode 8.0) reports
// it. Apart from characters added after 8.0, only these six changed category since then
// (checked by comparing the crate's tables with ICU over all code points).
UCharCategory legacy_category(char32_t cp) {
  if (cp < 0x80) return static_cast<UCharCategory>(u_charType(static_cast<UChar32>(cp)));
  switch (cp) {
    case 0x166D:
      return U_OTHER_PUNCTUATION;  // CANADIAN SYLLABICS CHI SIGN: So since 12.0
    case 0x1734:
      return U_NON_SPACING_MARK;  // HANUNOO SIGN PAMUDPOD: Mc since 14.0
    case 0x1885:
      return U_OTHER_LETTER;  // MONGOLIAN LETTER ALI GALI BALUDA: Mn since 9.0
    case 0x1886:
      return U_OTHER_LETTER;  // MONGOLIAN LETTER ALI GALI THREE BALUDA: Mn since 9.0
    case 0xA9BD:
      return U_COMBINING_SPACING_MARK;  // JAVANESE CONSONANT SIGN KERET: Mn since 12.0
    case 0x111C9:
      return U_OTHER_PUNCTUATION;  // SHARADA SANDHI MARK: Mn since 11.0
    default:
      break;
  }
  if (!assigned_by(cp, 8, 0)) return U_UNASSIGNED;
  return static_cast<UCharCategory>(u_charType(static_cast<UChar32>(cp)));
}

// Uppercase letters of Unicode 16.0 and 17.0, which Rust's char::to_lowercase (and so the
// tokenizers library) lowercases but which ICU releases older than those versions do not know
// (Debian 12 ships ICU 72, Unicode 15.0). Consulted only for code points ICU reports unassigned;
// [first, last] maps to [lower, lower + last - first].
struct NewerCaseRange {
  char32_t first, last, lower;
};
constexpr NewerCaseRange kNewerLowercase[] = {
    {0x1C89, 0x1C89, 0x1C8A},     // CYRILLIC CAPITAL LETTER TJE (16.0)
    {0xA7CB, 0xA7CB, 0x0264},     // LATIN CAPITAL LETTER RAMS HORN (16.0)
    {0xA7CC, 0xA7CC, 0xA7CD},     // LATIN CAPITAL LETTER S WITH DIAGONAL STROKE (16.0)
    {0xA7CE, 0xA7CE, 0xA7CF},     // (17.0)
    {0xA7D2, 0xA7D2, 0xA7D3},     // (17.0)
    {0xA7D4, 0xA7D4, 0xA7D5},     // (17.0)
    {0xA7DA, 0xA7DA, 0xA7DB},     // LATIN CAPITAL LETTER LAMBDA (16.0)
    {0xA7DC, 0xA7DC, 0x019B},     // LATIN CAPITAL LETTER LAMBDA WITH STROKE (16.0)
    {0x10D50, 0x10D65, 0x10D70},  // GARAY CAPITAL LETTERS (16.0)
    {0x16EA0, 0x16EB8, 0x16EBB},  // BERIA ERFE CAPITAL LETTERS (17.0)
};

}  // namespace

DecodedText decode_utf8(std::string_view text, std::string_view what) {
  DecodedText out;
  out.chars.reserve(text.size());
  out.byte_offsets.reserve(text.size() + 1);
  size_t pos = 0;
  while (pos < text.size()) {
    const Utf8Step step = decode_one(text, pos);
    if (step.error) {
      char byte_hex[8];
      std::snprintf(byte_hex, sizeof byte_hex, "0x%02X", static_cast<unsigned>(static_cast<uint8_t>(text[pos])));
      throw Error(std::string(what) + " is not valid UTF-8: " + step.error + " (byte " + byte_hex +
                  ") at byte offset " + std::to_string(pos) + "; re-encode the input as UTF-8");
    }
    out.chars.push_back(step.cp);
    out.byte_offsets.push_back(static_cast<int64_t>(pos));
    pos += step.length;
  }
  out.byte_offsets.push_back(static_cast<int64_t>(text.size()));
  return out;
}

int64_t find_invalid_utf8(std::string_view text) {
  size_t pos = 0;
  while (pos < text.size()) {
    const Utf8Step step = decode_one(text, pos);
    if (step.error) return static_cast<int64_t>(pos);
    pos += step.length;
  }
  return -1;
}

int utf8_length(char32_t cp) {
  if (cp < 0x80) return 1;
  if (cp < 0x800) return 2;
  if (cp < 0x10000) return 3;
  return 4;
}

void append_utf8(char32_t cp, std::string& out) {
  if (cp < 0x80) {
    out.push_back(static_cast<char>(cp));
  } else if (cp < 0x800) {
    out.push_back(static_cast<char>(0xC0 | (cp >> 6)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else if (cp < 0x10000) {
    out.push_back(static_cast<char>(0xE0 | (cp >> 12)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else {
    out.push_back(static_cast<char>(0xF0 | (cp >> 18)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 12) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  }
}

std::string to_utf8(std::u32string_view chars) {
  std::string out;
  out.reserve(chars.size());
  for (char32_t c : chars) append_utf8(c, out);
  return out;
}

bool is_whitespace(char32_t cp) {
  if (cp < 0x80) return cp == ' ' || (cp >= 0x09 && cp <= 0x0D);
  return u_isUWhiteSpace(static_cast<UChar32>(cp));
}

bool is_legacy_other(char32_t cp) {
  const UCharCategory c = legacy_category(cp);
  return c == U_CONTROL_CHAR || c == U_FORMAT_CHAR || c == U_PRIVATE_USE_CHAR;
}

bool is_legacy_punctuation(char32_t cp) {
  switch (legacy_category(cp)) {
    case U_CONNECTOR_PUNCTUATION:
    case U_DASH_PUNCTUATION:
    case U_START_PUNCTUATION:
    case U_END_PUNCTUATION:
    case U_INITIAL_PUNCTUATION:
    case U_FINAL_PUNCTUATION:
    case U_OTHER_PUNCTUATION:
      return true;
    default:
      return false;
  }
}

bool is_legacy_nonspacing_mark(char32_t cp) {
  if (cp < 0x300) return false;  // fast path: nothing below U+0300 is Mn
  return legacy_category(cp) == U_NON_SPACING_MARK;
}

bool is_ascii_punctuation(char32_t cp) {
  return (cp >= 0x21 && cp <= 0x2F) || (cp >= 0x3A && cp <= 0x40) || (cp >= 0x5B && cp <= 0x60) ||
         (cp >= 0x7B && cp <= 0x7E);
}

void append_lowercase(char32_t cp, std::u32string& out) {
  if (cp < 0x80) {
    out.push_back(cp >= 'A' && cp <= 'Z' ? cp + ('a' - 'A') : cp);
    return;
  }
  UVersionInfo age;
  u_charAge(static_cast<UChar32>(cp), age);
  if (age[0] == 0) {
    for (const NewerCaseRange& r : kNewerLowercase) {
      if (cp >= r.first && cp <= r.last) {
        out.push_back(r.lower + (cp - r.first));
        return;
      }
    }
    out.push_back(cp);  // unassigned for ICU and not in the table above: no case
    return;
  }
  // u_strToLower with the root locale applies the full mappings of SpecialCasing.txt; the only
  // context-dependent root rule (Final_Sigma) never fires on a lone character, so lowercasing one
  // character at a time gives exactly Rust's char::to_lowercase.
  UChar src[2];
  int32_t src_len = 0;
  U16_APPEND_UNSAFE(src, src_len, static_cast<UChar32>(cp));
  UChar dst[8];
  UErrorCode status = U_ZERO_ERROR;
  const int32_t n = u_strToLower(dst, 8, src, src_len, "", &status);
  if (U_FAILURE(status)) {
    out.push_back(cp);
    return;
  }
  for (int32_t i = 0; i < n;) {
    UChar32 c;
    U16_NEXT(dst, i, n, c);
    out.push_back(static_cast<char32_t>(c));
  }
}

void append_canonical_decomposition(char32_t cp, std::u32string& out) {
  // Precomposed characters all sit at U+00C0 and above.
  if (cp < 0xC0 || !assigned_by(cp, 9, 0)) {
    out.push_back(cp);
    return;
  }
  UErrorCode status = U_ZERO_ERROR;
  const UNormalizer2* nfd = unorm2_getNFDInstance(&status);
  UChar buffer[32];
  const int32_t n =
      U_SUCCESS(status) ? unorm2_getDecomposition(nfd, static_cast<UChar32>(cp), buffer, 32, &status) : -1;
  if (n < 0 || U_FAILURE(status)) {
    out.push_back(cp);
    return;
  }
  for (int32_t i = 0; i < n;) {
    UChar32 c;
    U16_NEXT(buffer, i, n, c);
    out.push_back(static_cast<char32_t>(c));
  }
}

uint8_t canonical_combining_class(char32_t cp) {
  if (cp < 0x300) return 0;
  const uint8_t ccc = u_getCombiningClass(static_cast<UChar32>(cp));
  return (ccc != 0 && assigned_by(cp, 9, 0)) ? ccc : 0;
}

bool is_regex_word(char32_t cp) {
  const auto c = static_cast<UChar32>(cp);
  if (u_hasBinaryProperty(c, UCHAR_ALPHABETIC) || u_hasBinaryProperty(c, UCHAR_JOIN_CONTROL)) return true;
  switch (u_charType(c)) {
    case U_NON_SPACING_MARK:
    case U_COMBINING_SPACING_MARK:
    case U_ENCLOSING_MARK:
    case U_DECIMAL_DIGIT_NUMBER:
    case U_CONNECTOR_PUNCTUATION:
      return true;
    default:
      return false;
  }
}

size_t grapheme_end(std::u32string_view chars, size_t first) {
  const auto gcb = [&](size_t i) {
    return static_cast<UGraphemeClusterBreak>(
        u_getIntPropertyValue(static_cast<UChar32>(chars[i]), UCHAR_GRAPHEME_CLUSTER_BREAK));
  };
  const auto pictographic = [&](size_t i) {
    return u_hasBinaryProperty(static_cast<UChar32>(chars[i]), UCHAR_EXTENDED_PICTOGRAPHIC) != 0;
  };
  const auto is_control = [](UGraphemeClusterBreak b) { return b == U_GCB_CONTROL || b == U_GCB_CR || b == U_GCB_LF; };
  // State carried along the cluster for GB11 (pictographic Extend* ZWJ x pictographic) and
  // GB12/13 (regional indicators pair up).
  bool emoji_run = pictographic(first);  // the cluster so far is ExtPict Extend* (ZWJ)?
  int regional = gcb(first) == U_GCB_REGIONAL_INDICATOR ? 1 : 0;
  size_t i = first + 1;
  for (; i < chars.size(); ++i) {
    const UGraphemeClusterBreak prev = gcb(i - 1), next = gcb(i);
    bool join = false;
    if (prev == U_GCB_CR && next == U_GCB_LF) {
      join = true;  // GB3
    } else if (is_control(prev) || is_control(next)) {
      join = false;  // GB4, GB5
    } else if (prev == U_GCB_L && (next == U_GCB_L || next == U_GCB_V || next == U_GCB_LV || next == U_GCB_LVT)) {
      join = true;  // GB6
    } else if ((prev == U_GCB_LV || prev == U_GCB_V) && (next == U_GCB_V || next == U_GCB_T)) {
      join = true;  // GB7
    } else if ((prev == U_GCB_LVT || prev == U_GCB_T) && next == U_GCB_T) {
      join = true;  // GB8
    } else if (next == U_GCB_EXTEND || next == U_GCB_ZWJ || next == U_GCB_SPACING_MARK || prev == U_GCB_PREPEND) {
      join = true;  // GB9, GB9a, GB9b
    } else if (prev == U_GCB_ZWJ && emoji_run && pictographic(i)) {
      join = true;  // GB11
    } else if (prev == U_GCB_REGIONAL_INDICATOR && next == U_GCB_REGIONAL_INDICATOR && regional % 2 == 1) {
      join = true;  // GB12, GB13
    }
    if (!join) break;
    // Keep the GB11 state: a pictographic character starts a run; Extend and ZWJ continue it
    // (nothing may follow a ZWJ but the next pictograph); anything else ends it.
    if (pictographic(i)) {
      emoji_run = true;
    } else if (next == U_GCB_ZWJ || next == U_GCB_EXTEND) {
      emoji_run = emoji_run && prev != U_GCB_ZWJ;
    } else {
      emoji_run = false;
    }
    regional = next == U_GCB_REGIONAL_INDICATOR ? regional + 1 : 0;
  }
  return i;
}

}  // namespace headscope::unicode
