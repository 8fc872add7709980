// headscope — tokenizers read from a model's tokenizer.json (or vocab.txt).
// An Encoding keeps, for every token, its id, its text, its byte span in the original
// string and the index of the pre-tokenized word it belongs to, so that analysis can go
// from tokens to words and the UI can highlight the original text.
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace headscope {

struct Token {
  int32_t id = 0;
  std::string text;      // the vocabulary entry, e.g. "##ing", "[CLS]", "Ġthe"
  int64_t begin = 0;     // byte offset of the first byte in the original text (0 for specials)
  int64_t end = 0;       // one past the last byte (begin == end for special tokens)
  bool special = false;  // added by the template ([CLS], [SEP], <s>, BOS)
  int32_t word = -1;     // index of the pre-tokenized word it belongs to; -1 for specials
};

struct Encoding {
  std::vector<Token> tokens;
  bool truncated = false;  // true when truncation dropped tokens (only when asked for)
  std::vector<int32_t> ids() const {
    std::vector<int32_t> v;
    v.reserve(tokens.size());
    for (const Token& t : tokens) v.push_back(t.id);
    return v;
  }
  size_t size() const { return tokens.size(); }
};

// How a token reads to a person: the part of `text` it covers (token.begin .. token.end, widened to
// whole UTF-8 characters), so byte-level symbols (Ġ, Ċ, Ã¼) never show. Surrounding spaces are
// dropped; a token of whitespace only reads as ␣ (space), ↵ (line break) or ⇥ (tab). WordPiece's
// "##" is kept so that a split word still shows its pieces. A special token reads as its own text.
std::string token_display(std::string_view text, const Token& token);

struct EncodeOptions {
  bool add_special_tokens = true;
  // 0: no limit from the caller. When the encoding (specials included) is longer than
  // max_length: throw Error, unless truncate is set, then keep the first tokens.
  int64_t max_length = 0;
  bool truncate = false;
};

class Tokenizer {
 public:
  virtual ~Tokenizer() = default;
  // Throws Error on invalid UTF-8 and on over-long text (see EncodeOptions).
  virtual Encoding encode(std::string_view text, const EncodeOptions& options) const = 0;
  virtual std::string token_text(int32_t id) const = 0;
  // The text a sequence of ids stands for, as the tokenizer's decoder writes it: byte-level tokens
  // turned back into their bytes, SentencePiece's ▁ into spaces, WordPiece's ## pieces joined.
  // Special tokens are kept as their text. May end inside a UTF-8 character if the ids do.
  virtual std::string decode(const std::vector<int32_t>& ids) const;
  virtual int32_t vocab_size() const = 0;
  // Reads tokenizer.json in `model_dir` (or vocab.txt for WordPiece models without one).
  static std::unique_ptr<Tokenizer> from_model_dir(const std::string& model_dir);
  static std::unique_ptr<Tokenizer> from_tokenizer_json(const std::string& path);
  // The same from the contents of a tokenizer.json; `source` names it in error messages.
  static std::unique_ptr<Tokenizer> from_json_string(std::string_view contents,
                                                     const std::string& source = "tokenizer.json");
};

}  // namespace headscope
