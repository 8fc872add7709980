// headscope — the encoding pipeline that every tokenizer.json describes, whatever its model.
//
// A Hugging Face tokenizer encodes a text in five steps (tokenizers/src/tokenizer/mod.rs,
// encode_single_sequence), and PipelineTokenizer runs the same five:
//   1. added tokens: literal occurrences of added/special tokens ("[MASK]") are cut out of the raw
//      text first and become tokens as they are (AddedVocabulary);
//   2. normalizer: the remaining pieces are normalized (Normalizer), alignments kept;
//   3. pre-tokenizer: each piece is split into words (PreTokenizer);
//   4. model: each word becomes tokens (Model: WordPiece, BPE, ...);
//   5. post-processor: the template adds [CLS]/[SEP]-like tokens (PostProcessor).
// Word indices count the units of steps 1 and 3 in order. Offsets are byte spans in the original
// text, computed from the alignments of step 2.
//
// The components are chosen by the "type" fields of tokenizer.json through small tables in
// tokenizer.cc; a new model or normalizer is one reader function and one table line.
#pragma once
#include <cstdint>
#include <memory>
#include <nlohmann/json_fwd.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "headscope/tokenizer.h"
#include "tokenizer/normalized_string.h"

namespace headscope::tokenizer {

// Token text <-> id, shared by the models. Lookups take string_view without allocating.
struct Vocab {
  struct Hash {
    using is_transparent = void;
    size_t operator()(std::string_view s) const { return std::hash<std::string_view>{}(s); }
  };
  std::unordered_map<std::string, int32_t, Hash, std::equal_to<>> ids;
  std::vector<std::string> tokens;  // [max id + 1]; empty where no entry has that id

  void add(std::string token, int32_t id);
  std::optional<int32_t> find(std::string_view token) const {
    const auto it = ids.find(token);
    if (it == ids.end()) return std::nullopt;
    return it->second;
  }
};

class Normalizer {
 public:
  virtual ~Normalizer() = default;
  virtual void normalize(NormalizedString& text) const = 0;
};

class PreTokenizer {
 public:
  virtual ~PreTokenizer() = default;
  // Appends the words of `piece` to `words` (no empty words).
  virtual void pre_tokenize(const NormalizedString& piece, std::vector<NormalizedString>& words) const = 0;
};

// One token of a word: its id and the characters [first, last) of the word it covers.
struct ModelToken {
  int32_t id;
  size_t first;
  size_t last;
};

class Model {
 public:
  virtual ~Model() = default;
  // Appends the tokens of one (non-empty) word.
  virtual void tokenize(const NormalizedString& word, std::vector<ModelToken>& out) const = 0;
  virtual const Vocab& vocab() const = 0;
};

// An entry of tokenizer.json "added_tokens" (tokenizers/src/tokenizer/added_vocabulary.rs).
struct AddedToken {
  std::string content;
  int32_t id = 0;
  bool special = false;
  bool single_word = false;  // only match when not inside a word
  bool lstrip = false;       // also swallow the whitespace before the match
  bool rstrip = false;       // also swallow the whitespace after the match
  bool normalized = false;   // match against the normalized text instead of the raw text
};

// The template of the post-processor for a single sequence: special pieces and the sequence.
struct TemplatePiece {
  bool is_sequence = false;
  std::vector<int32_t> ids;         // special pieces only
  std::vector<std::string> tokens;  // special pieces only, same length as ids
};
struct PostProcessor {
  std::vector<TemplatePiece> single;  // empty: no post-processor, nothing is added
  // ByteLevel / RobertaProcessing: narrow the spans of tokens that start or end with spaces
  // (trim_byte_level_offsets in tokenizer/post_processors.h).
  bool trim_offsets = false;
  bool trim_keeps_prefix_space = false;
  size_t added_count() const;
};

// How ids become text again (tokenizer.json "decoder").
// kSentencePiece drops the space that the first '▁' stands for (Metaspace, Llama 2's Strip step);
// kSentencePieceKeepSpace keeps it (Gemma: its decoder has no Strip step).
enum class DecodeStyle { kConcatenate, kByteLevel, kSentencePiece, kSentencePieceKeepSpace, kWordPiece };

class PipelineTokenizer final : public Tokenizer {
 public:
  struct Parts {
    std::string source;                           // the file it was read from, for messages
    std::unique_ptr<Normalizer> normalizer;       // may be null
    std::unique_ptr<PreTokenizer> pre_tokenizer;  // may be null: each piece is one word
    std::unique_ptr<Model> model;                 // required
    std::vector<AddedToken> added_tokens;
    PostProcessor post_processor;
    DecodeStyle decode_style = DecodeStyle::kConcatenate;  // from "decoder" (decode_style_of in bpe.h)
  };
  explicit PipelineTokenizer(Parts parts);

  Encoding encode(std::string_view text, const EncodeOptions& options) const override;
  std::string token_text(int32_t id) const override;
  int32_t vocab_size() const override;
  std::string decode(const std::vector<int32_t>& ids) const override;

 private:
  // Added tokens to look for, indexed by first character, longest first at each character.
  struct PatternSet {
    std::vector<std::u32string> texts;  // what is matched: the content, normalized if the token is
    std::vector<size_t> tokens;         // index into parts_.added_tokens, per text
    std::unordered_map<char32_t, std::vector<size_t>> by_first_char;
    void add(std::u32string text, size_t token);
    void index();
    bool empty() const { return texts.empty(); }
  };
  struct Piece {
    NormalizedString text;
    int64_t added = -1;  // index into parts_.added_tokens when this piece is an added token
  };
  // Cuts the matches of `patterns` out of `piece` (leftmost-longest, non-overlapping) and appends
  // the pieces in order.
  void split_added(NormalizedString piece, const PatternSet& patterns, std::vector<Piece>& out) const;
  // encode() without naming the file in ResourceErrors (encode adds it).
  Encoding encode_unchecked(std::string_view text, const EncodeOptions& options) const;
  // Steps 1-4 (and the byte-level offset trim) over the whole of `text`; when stop_after > 0 the
  // model step ends once that many tokens are out, and the first stop_after tokens are returned.
  std::vector<Token> text_tokens(std::string_view text, size_t stop_after) const;
  // The first `want` tokens of text_tokens(text, 0) (all of them when there are fewer), found by
  // encoding growing prefixes of the text until two of them agree on that many tokens that the
  // rest of the text cannot change (pipeline.cc, leading_tokens). A text far over a length limit
  // is then encoded only as far as the limit needs.
  std::vector<Token> leading_tokens(std::string_view text, size_t want) const;

  Parts parts_;
  PatternSet raw_patterns_;              // added tokens matched in the original text
  PatternSet normalized_patterns_;       // added tokens matched after normalization
  std::vector<std::string> id_to_text_;  // [vocab_size]: model vocabulary and added tokens
};

// A tokenizer from an already parsed tokenizer.json document (tokenizer.cc); `source` names it in
// errors. GGUF files describe their tokenizer in this form too (tokenizer/gguf_vocab.h).
std::unique_ptr<Tokenizer> from_json(const nlohmann::json& root, const std::string& source);

// ---- readers of tokenizer.json components (tables in tokenizer.cc) ----

// A token id from tokenizer.json: an integer in [0, limit), limit at most limits::kMaxVocabulary.
// Throws Error naming `path` and `what` (e.g. "model.vocab entry 'foo'") otherwise.
int32_t read_token_id(const nlohmann::json& value, int64_t limit, const std::string& what, const std::string& path);
// A model's "vocab" object ({token: id}). Ids may leave gaps (filled by added tokens) but must stay
// below the number of entries plus limits::kMaxVocabIdSlack, so a stray id of 100,000,000 cannot
// make the id table that large.
Vocab read_vocab(const nlohmann::json& vocab, const std::string& where, const std::string& path);

// Reads "added_tokens". Throws Error naming `path` on malformed entries.
std::vector<AddedToken> read_added_tokens(const nlohmann::json& added, const std::string& path);

}  // namespace headscope::tokenizer
