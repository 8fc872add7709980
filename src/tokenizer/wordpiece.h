// headscope — BERT's tokenizer: BertNormalizer, BertPreTokenizer and the WordPiece model, as the
// Hugging Face `tokenizers` library defines them (tokenizers/src/normalizers/bert.rs,
// tokenizers/src/pre_tokenizers/bert.rs, tokenizers/src/models/wordpiece/mod.rs).
#pragma once
#include <memory>
#include <nlohmann/json_fwd.hpp>
#include <optional>
#include <string>

#include "tokenizer/pipeline.h"

namespace headscope::tokenizer {

struct BertNormalizerOptions {
  bool clean_text = true;             // drop control characters, U+0000, U+FFFD; whitespace -> ' '
  bool handle_chinese_chars = true;   // put spaces around CJK ideographs so each is its own word
  std::optional<bool> strip_accents;  // NFD then drop nonspacing marks; unset: same as lowercase
  bool lowercase = true;
};

class BertNormalizer final : public Normalizer {
 public:
  explicit BertNormalizer(BertNormalizerOptions options) : options_(options) {}
  void normalize(NormalizedString& text) const override;

 private:
  BertNormalizerOptions options_;
};

// Splits on whitespace (dropped) and makes every punctuation character its own word. BERT's
// punctuation is Unicode punctuation (P*) plus all ASCII symbols such as $, +, <, ^, `, | and ~.
class BertPreTokenizer final : public PreTokenizer {
 public:
  void pre_tokenize(const NormalizedString& piece, std::vector<NormalizedString>& words) const override;
};

struct WordPieceOptions {
  std::string unk_token = "[UNK]";
  std::string continuing_subword_prefix = "##";
  size_t max_input_chars_per_word = 100;  // longer words become unk_token
};

// Greedy longest-match-first: the longest vocabulary entry that starts the word, then the longest
// "##"-prefixed entry that continues it, and so on; a word that cannot be covered is one [UNK].
class WordPiece final : public Model {
 public:
  WordPiece(Vocab vocab, WordPieceOptions options, const std::string& source);
  void tokenize(const NormalizedString& word, std::vector<ModelToken>& out) const override;
  const Vocab& vocab() const override { return vocab_; }

 private:
  Vocab vocab_;
  WordPieceOptions options_;
  int32_t unk_id_ = 0;
  size_t max_entry_bytes_ = 0;  // longest vocabulary entry: longer candidates cannot match
};

// Readers of tokenizer.json components, used by the tables in tokenizer.cc.
std::unique_ptr<Normalizer> read_bert_normalizer(const nlohmann::json& normalizer, const std::string& path);
std::unique_ptr<PreTokenizer> read_bert_pre_tokenizer(const nlohmann::json& pre_tokenizer, const std::string& path);
std::unique_ptr<Model> read_wordpiece_model(const nlohmann::json& model, const std::string& path);

// A BERT tokenizer from a model folder without tokenizer.json: vocab.txt (one token per line, the
// line number is the id) and tokenizer_config.json (do_lower_case, strip_accents,
// tokenize_chinese_chars, special token names), configured as transformers' BertTokenizerFast
// builds it from the same files.
std::unique_ptr<Tokenizer> read_wordpiece_vocab_dir(const std::string& dir);

}  // namespace headscope::tokenizer
