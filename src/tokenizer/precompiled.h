// headscope — the `Precompiled` normalizer of tokenizer.json: SentencePiece's compiled
// normalization rules (nmt_nfkc, nfkc_cf, ...), as XLM-R, T5, ALBERT and mBART files carry them.
//
// The rules come as "precompiled_charsmap", a base64 blob that SentencePiece writes
// (sentencepiece/src/normalizer.cc) and the `spm_precompiled` crate reads for `tokenizers`:
//
//   offset 0          u32 little-endian  trie_size: byte length of the trie
//   offset 4          u32[trie_size / 4] the trie: a darts-clone double array over UTF-8 bytes;
//                                        each unit packs a label (bits 0-7, and bit 31 for
//                                        non-leaf checks), a has-leaf flag (bit 8) and an offset
//                                        to the children (bits 10-31, shifted left by 8 when
//                                        bit 9 is set); a leaf's unit holds a value (bits 0-30)
//   offset 4 + 4*n    bytes to the end   the replacement strings, UTF-8, each ended by NUL; a
//                                        value is the byte offset of one of them
//
// Normalizing follows tokenizers/src/normalizers/precompiled.rs, quirks included: the text is
// walked one extended grapheme cluster at a time; a cluster shorter than 6 bytes is replaced as a
// whole when any prefix of its bytes is a key, by the replacement of the SHORTEST such prefix
// (the crate's first_prefix_value); otherwise each of its characters is looked up alone and
// replaced or kept. Alignments follow through NormalizedString::transform exactly as the library
// derives them, so offsets into the original text agree with it.
#pragma once
#include <cstdint>
#include <memory>
#include <nlohmann/json_fwd.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "tokenizer/pipeline.h"

namespace headscope::tokenizer {

// A parsed precompiled_charsmap. Every read of the blob is bounds-checked: a lying trie or value
// throws Error naming `where` (the tokenizer file), never reads outside the blob.
class PrecompiledCharsmap {
 public:
  // `blob` is the decoded charsmap. Throws Error when it is shorter than its header says, the trie
  // is empty or the replacement strings are not UTF-8.
  PrecompiledCharsmap(std::string_view blob, std::string where);

  // The replacement for the shortest prefix of `key` that is in the trie, or nothing. A NUL byte
  // in `key` ends the search (as in darts-clone). Throws Error when the trie points outside itself
  // or a value outside the replacement strings.
  std::optional<std::string_view> lookup(std::string_view key) const;

 private:
  uint32_t unit(size_t pos) const;

  std::vector<uint32_t> units_;  // [trie_size / 4] the double array
  std::string normalized_;       // the replacement strings, each ended by NUL
  std::string where_;
};

// Normalizes with a charsmap as tokenizers' Precompiled does (see the top of this file).
class PrecompiledNormalizer final : public Normalizer {
 public:
  explicit PrecompiledNormalizer(PrecompiledCharsmap charsmap) : charsmap_(std::move(charsmap)) {}
  void normalize(NormalizedString& s) const override;

 private:
  PrecompiledCharsmap charsmap_;
};

// Decodes standard base64 with padding (RFC 4648 section 4), as the `base64` crate's STANDARD
// engine accepts it. Throws Error naming `where` on any other character or a bad length.
std::string decode_base64(std::string_view text, const std::string& where);

// Reader of {"type": "Precompiled", "precompiled_charsmap": "<base64>"}, registered in the table of
// tokenizer.cc. Throws Error naming `path` when the field is missing or the blob is malformed.
std::unique_ptr<Normalizer> read_precompiled_normalizer(const nlohmann::json& spec, const std::string& path);

}  // namespace headscope::tokenizer
