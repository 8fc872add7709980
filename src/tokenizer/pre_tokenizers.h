// headscope — the normalizers and pre-tokenizers of BPE tokenizers, as tokenizer.json declares them.
//
// A BPE tokenizer (GPT-2, Llama, Qwen2, SmolLM, Mistral) cuts text into "words" before the model
// merges bytes or characters inside each word. tokenizer.json describes that cutting with a
// normalizer (e.g. Llama-2's Prepend("▁") + Replace(" ", "▁")) and a pre-tokenizer (e.g. GPT-2's
// ByteLevel with its split regex, Llama-3's Split + ByteLevel, SentencePiece's Metaspace). We follow
// the Hugging Face `tokenizers` library (tokenizers/src/pre_tokenizers/*.rs, normalizers/*.rs), the
// oracle of our tests, including how each step moves the alignment of characters to the original
// text (NormalizedString), so token offsets agree with it too.
//
// Provided here (tokenizer.cc's tables map the "type" names to these readers):
//   normalizers:     Sequence, Prepend, Replace (String or Regex pattern), NFD, Lowercase
//   pre-tokenizers:  Sequence, ByteLevel, Split (String or Regex; all five behaviours; invert),
//                    Digits, Metaspace, Whitespace, WhitespaceSplit
//   post-processors: ByteLevel (offset trimming), Sequence, RobertaProcessing
// Regexes are run by ICU. tokenizers uses Oniguruma, whose \s / \S are the Unicode White_Space
// property; ICU's \s is narrower ([\t\n\f\r\p{Z}], no U+000B or U+0085), so patterns are rewritten
// to \p{White_Space} before compiling.
#pragma once
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "tokenizer/normalized_string.h"
#include "tokenizer/pipeline.h"

namespace headscope::tokenizer {

// The GPT-2 byte ↔ character table (openai/gpt-2 encoder.py, bytes_to_unicode): printable bytes
// (33–126, 161–172, 174–255) stand for themselves, the other 68 bytes for U+0100, U+0101, ... in
// order, so that every byte string is a printable string without spaces. ' ' becomes 'Ġ' (U+0120).
char32_t byte_to_char(uint8_t byte);
// The byte a byte-level character stands for, or -1 if `c` is not one of the 256.
int char_to_byte(char32_t c);

// The split patterns in use by the released tokenizers (Oniguruma syntax, as in tokenizer.json).
extern const char* const kGpt2SplitPattern;
extern const char* const kLlama3SplitPattern;
extern const char* const kQwen2SplitPattern;

// A compiled regular expression (ICU), matched against code points.
class Regex {
 public:
  explicit Regex(const std::string& pattern);  // throws Error naming the pattern
  ~Regex();
  Regex(const Regex&) = delete;
  Regex& operator=(const Regex&) = delete;
  // Non-overlapping matches, left to right, as [begin, end) character index pairs.
  std::vector<std::pair<size_t, size_t>> find_all(const std::u32string& text) const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// How a split keeps the matches (tokenizers' SplitDelimiterBehavior).
enum class SplitBehavior { kRemoved, kIsolated, kMergedWithPrevious, kMergedWithNext, kContiguous };
SplitBehavior parse_split_behavior(const std::string& name, const std::string& where);

// Cuts `piece` at `matches` (sorted, non-overlapping character ranges) and appends the non-empty
// pieces to `out` (tokenizers' NormalizedString::split).
void split_at_matches(const NormalizedString& piece, const std::vector<std::pair<size_t, size_t>>& matches,
                      SplitBehavior behavior, bool invert, std::vector<NormalizedString>& out);

// Inserts `prefix` before the first character, aligned to that character's original span
// (NormalizedString::prepend in tokenizers). No effect on an empty string.
void prepend(NormalizedString& s, const std::u32string& prefix);

// ---- readers of tokenizer.json components, registered in the tables of tokenizer.cc ----
// Each throws Error naming `path` when the component is malformed.

// Normalizers.
std::unique_ptr<Normalizer> read_sequence_normalizer(const nlohmann::json& spec, const std::string& path);
std::unique_ptr<Normalizer> read_prepend_normalizer(const nlohmann::json& spec, const std::string& path);
std::unique_ptr<Normalizer> read_replace_normalizer(const nlohmann::json& spec, const std::string& path);
std::unique_ptr<Normalizer> read_nfd_normalizer(const nlohmann::json& spec, const std::string& path);
std::unique_ptr<Normalizer> read_lowercase_normalizer(const nlohmann::json& spec, const std::string& path);

// Pre-tokenizers.
std::unique_ptr<PreTokenizer> read_sequence_pre_tokenizer(const nlohmann::json& spec, const std::string& path);
std::unique_ptr<PreTokenizer> read_byte_level_pre_tokenizer(const nlohmann::json& spec, const std::string& path);
std::unique_ptr<PreTokenizer> read_split_pre_tokenizer(const nlohmann::json& spec, const std::string& path);
std::unique_ptr<PreTokenizer> read_digits_pre_tokenizer(const nlohmann::json& spec, const std::string& path);
std::unique_ptr<PreTokenizer> read_metaspace_pre_tokenizer(const nlohmann::json& spec, const std::string& path);
std::unique_ptr<PreTokenizer> read_whitespace_pre_tokenizer(const nlohmann::json& spec, const std::string& path);
std::unique_ptr<PreTokenizer> read_whitespace_split_pre_tokenizer(const nlohmann::json& spec, const std::string& path);

// Post-processors: ByteLevel (offset trimming only), Sequence (their effects combined),
// RobertaProcessing (<s> $A </s>, with ByteLevel's trimming).
PostProcessor read_byte_level_processing(const nlohmann::json& spec, const std::string& path);
PostProcessor read_sequence_processing(const nlohmann::json& spec, const std::string& path);
PostProcessor read_roberta_processing(const nlohmann::json& spec, const std::string& path);

// ByteLevel's offset trimming (tokenizers/src/pre_tokenizers/byte_level.rs, process_offsets): a
// token whose text starts or ends with spaces ('Ġ') gets a span without them, except the one space
// that add_prefix_space put before the text (`keeps_prefix_space`). Tokens are those of `text`,
// before the template adds its special tokens. The library's Python API, which transformers uses,
// trims character offsets; we move our byte offsets by whole characters of `text` so that both
// agree (a prefix space stands for the whole first character, which may be several bytes).
void trim_byte_level_offsets(std::string_view text, std::vector<Token>& tokens, bool keeps_prefix_space);

// One component read through the tables of tokenizer.cc (defined there); the Sequence readers
// use them for their elements.
std::unique_ptr<Normalizer> read_normalizer(const nlohmann::json& spec, const std::string& path);
std::unique_ptr<PreTokenizer> read_pre_tokenizer(const nlohmann::json& spec, const std::string& path);
PostProcessor read_post_processor(const nlohmann::json& spec, const std::string& path);

}  // namespace headscope::tokenizer
