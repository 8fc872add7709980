// headscope — Unigram model (tokenizers/src/models/unigram/model.rs).
#include "tokenizer/unigram.h"

#include <cstdio>
#include <limits>
#include <nlohmann/json.hpp>

#include "headscope/error.h"
#include "headscope/limits.h"
#include "tokenizer/unicode.h"

namespace headscope::tokenizer {

namespace {
// The unknown piece scores this much below the worst piece (K_UNK_PENALTY in the library).
constexpr double kUnknownPenalty = 10.0;
}  // namespace

Unigram::Unigram(const std::vector<std::pair<std::string, double>>& pieces, std::optional<int32_t> unk_id,
                 bool byte_fallback, const std::string& source)
    : unk_id_(unk_id), byte_fallback_(byte_fallback), source_(source) {
  if (unk_id_ && (*unk_id_ < 0 || static_cast<size_t>(*unk_id_) >= pieces.size())) {
    throw Error(source + ": model.unk_id " + std::to_string(*unk_id_) + " is outside the " +
                std::to_string(pieces.size()) + " pieces of the vocabulary");
  }
  double min_score = std::numeric_limits<double>::infinity();
  vocab_.ids.reserve(pieces.size());
  scores_.reserve(pieces.size());
  piece_at_.push_back(-1);
  for (size_t id = 0; id < pieces.size(); ++id) {
    const auto& [piece, score] = pieces[id];
    vocab_.add(piece, static_cast<int32_t>(id));
    scores_.push_back(score);
    min_score = std::min(min_score, score);
    int32_t node = 0;
    for (unsigned char b : piece) {
      const auto [it, inserted] = trie_.try_emplace(edge(node, b), static_cast<int32_t>(piece_at_.size()));
      if (inserted) piece_at_.push_back(-1);
      node = it->second;
    }
    if (node != 0) piece_at_[static_cast<size_t>(node)] = static_cast<int32_t>(id);
  }
  // A piece listed twice is found under its last id, with that id's score, as in the library.
  for (size_t node = 1; node < piece_at_.size(); ++node) {
    if (piece_at_[node] >= 0) piece_at_[node] = *vocab_.find(vocab_.tokens[static_cast<size_t>(piece_at_[node])]);
  }
  unk_score_ = min_score - kUnknownPenalty;
  if (byte_fallback_) {
    byte_ids_.assign(256, -1);
    char name[8];
    for (int b = 0; b < 256; ++b) {
      std::snprintf(name, sizeof name, "<0x%02X>", b);
      if (const auto id = vocab_.find(name)) byte_ids_[static_cast<size_t>(b)] = *id;
    }
  }
}

void Unigram::tokenize(const NormalizedString& word, std::vector<ModelToken>& out) const {
  const std::string text = word.utf8();
  const size_t size = text.size();
  // char_at[b]: the character of the word that starts at byte b (bytes of a piece end on characters).
  std::vector<size_t> char_at(size + 1, 0);
  {
    size_t c = 0;
    for (size_t b = 0; b < size; ++b) {
      if ((static_cast<unsigned char>(text[b]) & 0xC0) != 0x80)
        char_at[b] = c++;
      else
        char_at[b] = c - 1;
    }
    char_at[size] = c;
  }
  // best[e]: the best path over text[0, e): its score, the start of its last piece and that piece.
  struct Node {
    int32_t id = -1;
    double score = 0.0;
    int64_t start = -1;
  };
  std::vector<Node> best(size + 1);
  const auto offer = [&](size_t start, size_t end, int32_t id, double score) {
    Node& n = best[end];
    const double candidate = best[start].score + score;
    if (n.start < 0 || candidate > n.score) n = {id, candidate, static_cast<int64_t>(start)};
  };
  size_t start = 0;
  while (start < size) {
    size_t char_bytes = 1;
    while (start + char_bytes < size && (static_cast<unsigned char>(text[start + char_bytes]) & 0xC0) == 0x80) {
      ++char_bytes;
    }
    bool single = false;  // a piece covers exactly this character
    int32_t node = 0;
    for (size_t end = start; end < size; ++end) {
      const auto it = trie_.find(edge(node, static_cast<unsigned char>(text[end])));
      if (it == trie_.end()) break;
      node = it->second;
      const int32_t id = piece_at_[static_cast<size_t>(node)];
      if (id < 0) continue;
      offer(start, end + 1, id, scores_[static_cast<size_t>(id)]);
      single = single || end + 1 - start == char_bytes;
    }
    if (!single) {
      if (!unk_id_) {
        throw Error(source_ +
                    ": the text has a character that no piece covers and the vocabulary has no unknown piece");
      }
      offer(start, start + char_bytes, *unk_id_, unk_score_);
    }
    start += char_bytes;
  }
  // Back from the end, fusing runs of unknown pieces (the library always fuses them).
  struct Span {
    size_t first, last;  // bytes
    bool unknown;
  };
  std::vector<Span> spans;
  for (size_t end = size; end > 0;) {
    const Node& n = best[end];
    const auto first = static_cast<size_t>(n.start);
    const bool unknown = unk_id_ && n.id == *unk_id_;
    if (unknown && !spans.empty() && spans.back().unknown) {
      spans.back().first = first;
    } else {
      spans.push_back({first, end, unknown});
    }
    end = first;
  }
  for (auto it = spans.rbegin(); it != spans.rend(); ++it) {
    const std::string_view piece = std::string_view(text).substr(it->first, it->last - it->first);
    const size_t first = char_at[it->first], last = char_at[it->last];
    if (const auto id = vocab_.find(piece)) {
      out.push_back({*id, first, last});
      continue;
    }
    bool all = byte_fallback_;
    for (size_t k = 0; all && k < piece.size(); ++k) all = byte_ids_[static_cast<unsigned char>(piece[k])] >= 0;
    if (all) {
      for (unsigned char b : piece) out.push_back({byte_ids_[b], first, last});
      continue;
    }
    out.push_back({*unk_id_, first, last});
  }
}

std::unique_ptr<Model> read_unigram_model(const nlohmann::json& model, const std::string& path) {
  if (!model.contains("vocab") || !model.at("vocab").is_array()) {
    throw Error(path + ": Unigram model has no \"vocab\" list of [piece, score]");
  }
  const nlohmann::json& list = model.at("vocab");
  if (list.size() > static_cast<size_t>(limits::kMaxVocabulary)) {
    throw ResourceError(path + ": model.vocab has " + std::to_string(list.size()) + " entries, more than the " +
                        std::to_string(limits::kMaxVocabulary) + " a vocabulary may have");
  }
  std::vector<std::pair<std::string, double>> pieces;
  pieces.reserve(list.size());
  for (const nlohmann::json& entry : list) {
    if (!entry.is_array() || entry.size() != 2 || !entry[0].is_string() || !entry[1].is_number()) {
      throw Error(path + ": model.vocab entry " + std::to_string(pieces.size()) + " is not [piece, score]");
    }
    std::string piece = entry[0].get<std::string>();
    if (piece.size() > static_cast<size_t>(limits::kMaxUnigramPieceBytes)) {
      throw ResourceError(path + ": model.vocab entry " + std::to_string(pieces.size()) + " is " +
                          std::to_string(piece.size()) + " bytes long, more than the " +
                          std::to_string(limits::kMaxUnigramPieceBytes) + " a Unigram piece may have");
    }
    pieces.emplace_back(std::move(piece), entry[1].get<double>());
  }
  std::optional<int32_t> unk_id;
  if (model.contains("unk_id") && !model.at("unk_id").is_null()) {
    unk_id = read_token_id(model.at("unk_id"), static_cast<int64_t>(pieces.size()), "model.unk_id", path);
  }
  return std::make_unique<Unigram>(pieces, unk_id, model.value("byte_fallback", false), path);
}

}  // namespace headscope::tokenizer
