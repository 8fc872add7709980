// headscope — the normalizers of tokenizer.json (tokenizers/src/normalizers/*.rs): edits of the
// text before it is cut into words, each keeping the alignment of characters to the original text
// (NormalizedString) so token offsets agree with the library. BertNormalizer is in wordpiece.h,
// Precompiled (SentencePiece charsmaps) in precompiled.h.
//
// Provided here (tokenizer.cc's table maps the "type" names to these readers): Sequence, Prepend
// (Llama-2's "▁"), Replace (String or Regex pattern), NFD, Lowercase.
#pragma once
#include <memory>
#include <nlohmann/json_fwd.hpp>
#include <string>
#include <vector>

#include "tokenizer/pipeline.h"

namespace headscope::tokenizer {

// Readers of tokenizer.json normalizers, registered in the table of tokenizer.cc. Each throws
// Error naming `path` when the component is malformed.
// Steps applied in order, as a "Sequence" normalizer (for tokenizers built from GGUF metadata).
std::unique_ptr<Normalizer> sequence_normalizer(std::vector<std::unique_ptr<Normalizer>> steps);
std::unique_ptr<Normalizer> read_sequence_normalizer(const nlohmann::json& spec, const std::string& path);
std::unique_ptr<Normalizer> read_prepend_normalizer(const nlohmann::json& spec, const std::string& path);
std::unique_ptr<Normalizer> read_replace_normalizer(const nlohmann::json& spec, const std::string& path);
std::unique_ptr<Normalizer> read_nfd_normalizer(const nlohmann::json& spec, const std::string& path);
std::unique_ptr<Normalizer> read_lowercase_normalizer(const nlohmann::json& spec, const std::string& path);

// One normalizer read through the table of tokenizer.cc (defined there); Sequence uses it for its
// elements.
std::unique_ptr<Normalizer> read_normalizer(const nlohmann::json& spec, const std::string& path);

}  // namespace headscope::tokenizer
