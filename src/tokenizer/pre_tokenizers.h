// headscope — the pre-tokenizers of tokenizer.json (tokenizers/src/pre_tokenizers/*.rs): how a
// normalized piece of text is cut into the "words" inside which the model merges bytes or
// characters (GPT-2's ByteLevel with its split regex, Llama-3's Split + ByteLevel, SentencePiece's
// Metaspace, ...). Each word keeps the alignment of its characters to the original text
// (NormalizedString), so token offsets agree with the library. BertPreTokenizer is in wordpiece.h.
//
// Provided here (tokenizer.cc's table maps the "type" names to these readers): Sequence,
// ByteLevel, Split (String or Regex; all five behaviours; invert), Digits, Metaspace, Whitespace,
// WhitespaceSplit. The regexes are run by ICU (pattern.h).
#pragma once
#include <cstdint>
#include <memory>
#include <nlohmann/json_fwd.hpp>
#include <string>

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

// Readers of tokenizer.json pre-tokenizers, registered in the table of tokenizer.cc. Each throws
// Error naming `path` when the component is malformed.
std::unique_ptr<PreTokenizer> read_sequence_pre_tokenizer(const nlohmann::json& spec, const std::string& path);
std::unique_ptr<PreTokenizer> read_byte_level_pre_tokenizer(const nlohmann::json& spec, const std::string& path);
std::unique_ptr<PreTokenizer> read_split_pre_tokenizer(const nlohmann::json& spec, const std::string& path);
std::unique_ptr<PreTokenizer> read_digits_pre_tokenizer(const nlohmann::json& spec, const std::string& path);
std::unique_ptr<PreTokenizer> read_metaspace_pre_tokenizer(const nlohmann::json& spec, const std::string& path);
std::unique_ptr<PreTokenizer> read_whitespace_pre_tokenizer(const nlohmann::json& spec, const std::string& path);
std::unique_ptr<PreTokenizer> read_whitespace_split_pre_tokenizer(const nlohmann::json& spec, const std::string& path);

// One pre-tokenizer read through the table of tokenizer.cc (defined there); Sequence uses it for
// its elements.
std::unique_ptr<PreTokenizer> read_pre_tokenizer(const nlohmann::json& spec, const std::string& path);

}  // namespace headscope::tokenizer
