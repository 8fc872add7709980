// headscope — the Precompiled normalizer (SentencePiece charsmaps); see precompiled.h for the blob
// layout and the normalization walk.
#include "tokenizer/precompiled.h"

#include <nlohmann/json.hpp>

#include "headscope/error.h"
#include "tokenizer/normalized_string.h"
#include "tokenizer/unicode.h"

namespace headscope::tokenizer {
namespace {

// The parts of a double-array unit (darts-clone's DoubleArrayUnit).
bool has_leaf(uint32_t unit) { return ((unit >> 8) & 1) == 1; }
uint32_t value_of(uint32_t unit) { return unit & ((1u << 31) - 1); }
uint32_t label_of(uint32_t unit) { return unit & ((1u << 31) | 0xFF); }
size_t offset_of(uint32_t unit) { return static_cast<size_t>(unit >> 10) << ((unit & (1u << 9)) >> 6); }

// Clusters shorter than this many bytes are looked up whole (precompiled.rs: grapheme.len() < 6).
constexpr size_t kWholeClusterBytes = 6;

// Appends `replacement` in place of `n_old` characters, with the change codes of precompiled.rs
// (fn replace): replacing characters are 0; when the replacement is longer, its last extra
// characters are insertions (1); when shorter, the character before takes the difference, so the
// surplus old characters are dropped. With nothing before (a removal at the very start) the
// library records no drop, and neither do we.
void replace(std::vector<CharChange>& dest, size_t n_old, const std::u32string& replacement) {
  for (char32_t c : replacement) dest.push_back({c, 0});
  const auto diff = static_cast<int64_t>(replacement.size()) - static_cast<int64_t>(n_old);
  if (diff > 0) {
    for (size_t k = dest.size() - static_cast<size_t>(diff); k < dest.size(); ++k) dest[k].change = 1;
  } else if (diff < 0 && !dest.empty()) {
    dest.back().change += static_cast<int>(diff);
  }
}

}  // namespace

PrecompiledCharsmap::PrecompiledCharsmap(std::string_view blob, std::string where) : where_(std::move(where)) {
  const auto u32_at = [&](size_t pos) {
    uint32_t v = 0;
    for (int b = 3; b >= 0; --b) v = (v << 8) | static_cast<unsigned char>(blob[pos + static_cast<size_t>(b)]);
    return v;
  };
  if (blob.size() < 4) {
    throw Error(where_ + ": precompiled_charsmap has " + std::to_string(blob.size()) +
                " bytes, fewer than the 4 of its trie size; the charsmap is truncated (re-export the tokenizer)");
  }
  const size_t n_units = u32_at(0) / 4;
  if (n_units > (blob.size() - 4) / 4) {
    throw Error(where_ + ": precompiled_charsmap says its trie has " + std::to_string(n_units) + " units but only " +
                std::to_string((blob.size() - 4) / 4) + " follow; the charsmap is truncated (re-export the tokenizer)");
  }
  if (n_units == 0) throw Error(where_ + ": precompiled_charsmap has an empty trie; the charsmap is damaged");
  units_.reserve(n_units);
  for (size_t i = 0; i < n_units; ++i) units_.push_back(u32_at(4 + 4 * i));
  normalized_ = std::string(blob.substr(4 + 4 * n_units));
  const int64_t bad = unicode::find_invalid_utf8(normalized_);
  if (bad >= 0) {
    throw Error(where_ + ": precompiled_charsmap's replacement strings are not valid UTF-8 at byte " +
                std::to_string(bad) + " of them; the charsmap is damaged");
  }
}

uint32_t PrecompiledCharsmap::unit(size_t pos) const {
  if (pos >= units_.size()) {
    throw Error(where_ + ": precompiled_charsmap's trie points at unit " + std::to_string(pos) + ", outside its " +
                std::to_string(units_.size()) + " units; the charsmap is damaged");
  }
  return units_[pos];
}

std::optional<std::string_view> PrecompiledCharsmap::lookup(std::string_view key) const {
  // darts-clone's prefix walk: from the root, each byte moves to node ^ offset ^ byte, which is a
  // child only when its label is that byte; the first node with a leaf ends the search.
  size_t node = offset_of(unit(0));
  for (const char ch : key) {
    const auto c = static_cast<unsigned char>(ch);
    if (c == 0) break;
    node ^= c;
    const uint32_t u = unit(node);
    if (label_of(u) != c) return std::nullopt;
    node ^= offset_of(u);
    if (!has_leaf(u)) continue;
    const size_t begin = value_of(unit(node));
    // A value must start a replacement string: inside the blob, on a character boundary.
    if (begin > normalized_.size() ||
        (begin < normalized_.size() && (static_cast<unsigned char>(normalized_[begin]) & 0xC0) == 0x80)) {
      throw Error(where_ + ": precompiled_charsmap's trie gives replacement offset " + std::to_string(begin) +
                  ", not the start of a character in its " + std::to_string(normalized_.size()) +
                  " bytes of replacement strings; the charsmap is damaged");
    }
    const size_t end = normalized_.find('\0', begin);
    return std::string_view(normalized_).substr(begin, end == std::string::npos ? std::string::npos : end - begin);
  }
  return std::nullopt;
}

void PrecompiledNormalizer::normalize(NormalizedString& s) const {
  const std::u32string& chars = s.chars();
  std::vector<CharChange> dest;
  dest.reserve(chars.size());
  bool modified = false;
  std::string key;
  const auto replacement_of = [&](size_t first, size_t last, std::u32string& out) {
    key = unicode::to_utf8(std::u32string_view(chars).substr(first, last - first));
    if (key.size() >= kWholeClusterBytes) return false;  // only clusters of several characters get here
    const auto found = charsmap_.lookup(key);
    if (!found) return false;
    out = unicode::decode_utf8(*found, "a precompiled_charsmap replacement").chars;  // valid: checked at load
    return true;
  };
  std::u32string replacement;
  for (size_t first = 0; first < chars.size();) {
    const size_t last = unicode::grapheme_end(chars, first);
    if (replacement_of(first, last, replacement)) {
      replace(dest, last - first, replacement);
      modified = true;
    } else {
      for (size_t i = first; i < last; ++i) {
        if (replacement_of(i, i + 1, replacement)) {
          replace(dest, 1, replacement);
          modified = true;
        } else {
          dest.push_back({chars[i], 0});
        }
      }
    }
    // A charsmap can map one character to a long string: stop before the text grows past its budget.
    s.check_size(dest.size(), "a Precompiled normalizer");
    first = last;
  }
  if (modified) s.transform(dest, 0);
}

std::string decode_base64(std::string_view text, const std::string& where) {
  const auto sextet = [](char c) -> int {
    if (c >= 'A' && c <= 'Z') return c - 'A';
    if (c >= 'a' && c <= 'z') return c - 'a' + 26;
    if (c >= '0' && c <= '9') return c - '0' + 52;
    if (c == '+') return 62;
    if (c == '/') return 63;
    return -1;
  };
  if (text.size() % 4 != 0) {
    throw Error(where + ": is not base64: its length " + std::to_string(text.size()) + " is not a multiple of 4");
  }
  std::string out;
  out.reserve(text.size() / 4 * 3);
  for (size_t i = 0; i < text.size(); i += 4) {
    const bool last = i + 4 == text.size();
    const int pad = last ? (text[i + 3] == '=') + (text[i + 2] == '=' && text[i + 3] == '=') : 0;
    uint32_t group = 0;
    for (size_t k = 0; k < 4; ++k) {
      const int v = k >= 4 - static_cast<size_t>(pad) ? 0 : sextet(text[i + k]);
      if (v < 0) throw Error(where + ": is not base64: unexpected character at offset " + std::to_string(i + k));
      group = (group << 6) | static_cast<uint32_t>(v);
    }
    out.push_back(static_cast<char>(group >> 16));
    if (pad < 2) out.push_back(static_cast<char>((group >> 8) & 0xFF));
    if (pad < 1) out.push_back(static_cast<char>(group & 0xFF));
  }
  return out;
}

std::unique_ptr<Normalizer> read_precompiled_normalizer(const nlohmann::json& spec, const std::string& path) {
  if (!spec.contains("precompiled_charsmap") || !spec.at("precompiled_charsmap").is_string()) {
    throw Error(path + ": normalizer Precompiled needs \"precompiled_charsmap\", a base64 string");
  }
  const std::string blob =
      decode_base64(spec.at("precompiled_charsmap").get_ref<const std::string&>(), path + ": precompiled_charsmap");
  return std::make_unique<PrecompiledNormalizer>(PrecompiledCharsmap(blob, path));
}

}  // namespace headscope::tokenizer
