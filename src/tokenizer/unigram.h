// headscope — the Unigram model of tokenizer.json ("model": {"type": "Unigram", ...}): the
// SentencePiece unigram language model (Kudo 2018) as XLM-R, T5, ALBERT and mBART vocabularies use it.
//
//   "vocab":         [[piece, score], ...]; the id of a piece is its index, the score its log-probability
//   "unk_id":        index of the unknown piece, or null
//   "byte_fallback": an unknown run becomes the <0xNN> pieces of its UTF-8 bytes when all exist
//
// A word is cut by Viterbi: the segmentation into pieces whose scores sum highest. A character
// that no one-character piece covers may also be the unknown piece, at the lowest score of the
// vocabulary minus 10. Consecutive unknown pieces are fused into one. Ties keep the path found
// first (the piece starting earliest). This is tokenizers/src/models/unigram/model.rs
// (encode_optimized, then tokenize) step for step, so ids and offsets agree with the library.
#pragma once
#include <cstdint>
#include <memory>
#include <nlohmann/json_fwd.hpp>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "tokenizer/pipeline.h"

namespace headscope::tokenizer {

class Unigram final : public Model {
 public:
  // pieces[id] = (piece, score). Throws Error naming `source` when unk_id is outside the pieces.
  Unigram(const std::vector<std::pair<std::string, double>>& pieces, std::optional<int32_t> unk_id, bool byte_fallback,
          const std::string& source);
  void tokenize(const NormalizedString& word, std::vector<ModelToken>& out) const override;
  const Vocab& vocab() const override { return vocab_; }

 private:
  // Byte trie of the pieces: child of (node, byte) in one map; node 0 is the root.
  static uint64_t edge(int32_t node, unsigned char byte) { return (static_cast<uint64_t>(node) << 8) | byte; }
  Vocab vocab_;
  std::vector<double> scores_;                  // [n_pieces]
  std::unordered_map<uint64_t, int32_t> trie_;  // (node, byte) -> node
  std::vector<int32_t> piece_at_;               // [n_nodes]: id of the piece ending at the node, or -1
  std::optional<int32_t> unk_id_;
  double unk_score_ = 0.0;
  bool byte_fallback_ = false;
  std::vector<int32_t> byte_ids_;  // [256]: id of <0xNN>, or -1 (byte_fallback only)
  std::string source_;
};

// Reader for tokenizer.json's "model" when its type is "Unigram" (table in tokenizer.cc).
std::unique_ptr<Model> read_unigram_model(const nlohmann::json& model, const std::string& path);

}  // namespace headscope::tokenizer
