// headscope — the BPE model of tokenizer.json ("model": {"type": "BPE", ...}): byte-pair encoding
// (Sennrich et al. 2016) as GPT-2, Llama, Qwen2, SmolLM and Mistral use it.
//
// A word (one piece from the pre-tokenizer; byte-level characters for GPT-2-style tokenizers, text
// with ▁ for SentencePiece-style ones) starts as one symbol per character. Then, repeatedly, the
// adjacent pair with the best (lowest) merge rank is replaced by its merged token; ties go to the
// leftmost pair. This is tokenizers/src/models/bpe/word.rs (merge_all) step for step, so ids agree
// with the library. Options, as in tokenizers/src/models/bpe/model.rs:
//   byte_fallback   a character missing from the vocabulary becomes its UTF-8 bytes as <0xNN>
//                   tokens (SentencePiece BPE) instead of the unknown token
//   unk_token       the token for characters that are in neither; fuse_unk joins consecutive ones
//   ignore_merges   a word that is itself a vocabulary entry is that one token (Llama-3)
// "merges" is a list of "left right" strings or, in newer files, of [left, right] pairs; its order
// is the rank. continuing_subword_prefix / end_of_word_suffix (unused by the decoder families) are
// refused with an Error.
#pragma once
#include <cstdint>
#include <memory>
#include <nlohmann/json_fwd.hpp>
#include <optional>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "tokenizer/pipeline.h"

namespace headscope::tokenizer {

struct BpeOptions {
  bool byte_fallback = false;
  bool ignore_merges = false;
  bool fuse_unk = false;
  std::optional<std::string> unk_token;
};

class Bpe final : public Model {
 public:
  // merges[r] = (left, right) has rank r. Merges whose parts or result are missing from the
  // vocabulary throw Error naming `source`, as the library refuses them.
  Bpe(Vocab vocab, const std::vector<std::pair<std::string, std::string>>& merges, BpeOptions options,
      const std::string& source);
  // The same from merges already resolved to ids: merges[r] = {left, right, merged} has rank r.
  // Used where the merges are derived from a vocabulary (SentencePiece GGUF, tokenizer/gguf_vocab.h).
  struct IdMerge {
    int32_t left, right, merged;
  };
  Bpe(Vocab vocab, const std::vector<IdMerge>& merges, BpeOptions options, const std::string& source);
  void tokenize(const NormalizedString& word, std::vector<ModelToken>& out) const override;
  const Vocab& vocab() const override { return vocab_; }

 private:
  struct Merge {
    int32_t rank;
    int32_t id;  // the merged token
  };
  static uint64_t pair_key(int32_t left, int32_t right) {
    return (static_cast<uint64_t>(static_cast<uint32_t>(left)) << 32) | static_cast<uint32_t>(right);
  }
  void set_up_options(const std::string& source);
  Vocab vocab_;
  BpeOptions options_;
  std::unordered_map<uint64_t, Merge> merges_;  // (left id, right id) -> rank and merged id
  std::optional<int32_t> unk_id_;
  std::vector<int32_t> byte_ids_;  // [256]: id of <0xNN>, or -1 (byte_fallback only)
};

// Reader for tokenizer.json's "model" when its type is "BPE" (table in tokenizer.cc).
std::unique_ptr<Model> read_bpe_model(const nlohmann::json& model, const std::string& path);

// The decode style a tokenizer.json "decoder" describes: ByteLevel -> kByteLevel; Metaspace, or a
// Sequence with Replace(▁ -> " ") / ByteFallback -> kSentencePiece; WordPiece -> kWordPiece; null
// or anything else -> kConcatenate.
DecodeStyle decode_style_of(const nlohmann::json& decoder);

// Token texts back to text: byte-level characters (Ġ, Ċ, ...) to their bytes; SentencePiece ▁ to a
// space and <0xNN> to the byte (the leading space of the text dropped, as the Strip/Metaspace
// decoders do); WordPiece pieces joined with spaces, "##" glued to the previous one. The result
// may end inside a multi-byte character when the tokens do. Used by `headscope generate`.
std::string decode_token_texts(DecodeStyle style, const std::vector<std::string>& token_texts);

}  // namespace headscope::tokenizer
