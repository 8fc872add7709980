// headscope — the post-processors of tokenizer.json (tokenizers/src/processors/*.rs): the template
// that adds [CLS]/[SEP]-like tokens around the sequence, and ByteLevel's trimming of token offsets.
// All of them are read into one PostProcessor value (pipeline.h).
//
// Provided here (tokenizer.cc's table maps the "type" names to these readers):
// TemplateProcessing, BertProcessing ([CLS] $A [SEP]), ByteLevel (offset trimming only), Sequence
// (their effects combined), RobertaProcessing (<s> $A </s>, with ByteLevel's trimming).
#pragma once
#include <nlohmann/json_fwd.hpp>
#include <string>
#include <string_view>
#include <vector>

#include "tokenizer/pipeline.h"

namespace headscope::tokenizer {

// Readers of tokenizer.json post-processors, registered in the table of tokenizer.cc. Each throws
// Error naming `path` when the component is malformed.
PostProcessor read_template_processing(const nlohmann::json& post, const std::string& path);
PostProcessor read_bert_processing(const nlohmann::json& post, const std::string& path);
PostProcessor read_byte_level_processing(const nlohmann::json& spec, const std::string& path);
PostProcessor read_sequence_processing(const nlohmann::json& spec, const std::string& path);
PostProcessor read_roberta_processing(const nlohmann::json& spec, const std::string& path);

// One post-processor read through the table of tokenizer.cc (defined there); Sequence uses it for
// its elements.
PostProcessor read_post_processor(const nlohmann::json& spec, const std::string& path);

// ByteLevel's offset trimming (tokenizers/src/pre_tokenizers/byte_level.rs, process_offsets): a
// token whose text starts or ends with spaces ('Ġ') gets a span without them, except the one space
// that add_prefix_space put before the text (`keeps_prefix_space`). Tokens are those of `text`,
// before the template adds its special tokens. The library's Python API, which transformers uses,
// trims character offsets; we move our byte offsets by whole characters of `text` so that both
// agree (a prefix space stands for the whole first character, which may be several bytes).
void trim_byte_level_offsets(std::string_view text, std::vector<Token>& tokens, bool keeps_prefix_space);

}  // namespace headscope::tokenizer
