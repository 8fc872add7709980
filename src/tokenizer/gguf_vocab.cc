#include "tokenizer/gguf_vocab.h"

#include <set>
#include <string_view>

#include "headscope/error.h"
#include "headscope/limits.h"
#include "tokenizer/pipeline.h"
#include "tokenizer/pre_tokenizers.h"
#include "tokenizer/unicode.h"

namespace headscope::tokenizer {

namespace {

constexpr int64_t kTokenControl = 3;
constexpr int64_t kTokenUserDefined = 4;

// tokenizer.ggml.pre values whose split regex transformers knows (GGUF_PRE_TOKENIZER_SPLITS).
const char* split_pattern_for(const std::string& pre) {
  static const std::set<std::string_view> llama3 = {"llama3", "llama-v3", "llama-bpe", "falcon3", "falcon-h1", "pixtral",
                                                    "midm-2.0", "lfm2", "jina-v5-nano", "dbrx", "smaug-bpe"};
  static const std::set<std::string_view> qwen2 = {"qwen2", "deepseek-r1-qwen", "kormo", "f2llmv2", "megrez"};
  if (llama3.count(pre)) return kLlama3SplitPattern;
  if (qwen2.count(pre)) return kQwen2SplitPattern;
  return nullptr;
}

bool is_byte_level_spelling(const std::u32string& chars) {
  for (char32_t c : chars) {
    if (char_to_byte(c) < 0) return false;
  }
  return true;
}

}  // namespace

nlohmann::json tokenizer_json_from_gguf(const io::GgufFile& file) {
  const std::string model = file.get_string("tokenizer.ggml.model", "");
  if (model != "gpt2") {
    throw Error(file.path() + ": tokenizer.ggml.model '" + model +
                "' is not supported (only byte-level BPE, 'gpt2'); use the model's Hugging Face folder instead");
  }
  const std::vector<std::string> tokens = file.get_string_array("tokenizer.ggml.tokens");
  const auto check_count = [&](const char* key, size_t n, int64_t limit) {
    if (n > static_cast<size_t>(limit)) {
      throw ResourceError(file.path() + ": " + key + " has " + std::to_string(n) + " entries, more than the " +
                          std::to_string(limit) + " allowed");
    }
  };
  check_count("tokenizer.ggml.tokens", tokens.size(), limits::kMaxVocabulary);
  std::vector<int64_t> types;
  if (file.has("tokenizer.ggml.token_type")) types = file.get_int_array("tokenizer.ggml.token_type");
  if (!types.empty() && types.size() != tokens.size()) {
    throw Error(file.path() + ": tokenizer.ggml.token_type has " + std::to_string(types.size()) + " entries for " +
                std::to_string(tokens.size()) + " tokens");
  }
  nlohmann::json vocab = nlohmann::json::object();
  nlohmann::json added = nlohmann::json::array();
  for (size_t i = 0; i < tokens.size(); ++i) {
    const std::u32string chars = unicode::decode_utf8(tokens[i], file.path() + " token " + std::to_string(i)).chars;
    const bool spelled = is_byte_level_spelling(chars);
    // Tokens written as plain text are respelled in the byte alphabet, as transformers does.
    std::string entry;
    if (spelled) {
      entry = tokens[i];
    } else {
      for (unsigned char b : tokens[i]) unicode::append_utf8(byte_to_char(b), entry);
    }
    vocab[entry] = static_cast<int64_t>(i);
    const int64_t type = types.empty() ? 1 : types[i];
    if ((type == kTokenControl && spelled) || type == kTokenUserDefined) {
      added.push_back({{"id", static_cast<int64_t>(i)}, {"content", tokens[i]}, {"special", type == kTokenControl},
                       {"single_word", false}, {"lstrip", false}, {"rstrip", false}, {"normalized", false}});
    }
  }
  nlohmann::json merges = nlohmann::json::array();
  if (file.has("tokenizer.ggml.merges")) {
    const std::vector<std::string> list = file.get_string_array("tokenizer.ggml.merges");
    check_count("tokenizer.ggml.merges", list.size(), limits::kMaxBpeMerges);
    for (const std::string& m : list) merges.push_back(m);
  }
  nlohmann::json pre;
  if (const char* pattern = split_pattern_for(file.get_string("tokenizer.ggml.pre", ""))) {
    pre = {{"type", "Sequence"},
           {"pretokenizers",
            {{{"type", "Split"}, {"pattern", {{"Regex", pattern}}}, {"behavior", "Isolated"}, {"invert", false}},
             {{"type", "ByteLevel"}, {"add_prefix_space", false}, {"use_regex", false}}}}};
  } else {
    pre = {{"type", "ByteLevel"}, {"add_prefix_space", false}, {"use_regex", true}};
  }
  return {{"added_tokens", added},
          {"normalizer", nullptr},
          {"pre_tokenizer", pre},
          {"post_processor", nullptr},
          {"decoder", {{"type", "ByteLevel"}}},
          {"model", {{"type", "BPE"}, {"vocab", vocab}, {"merges", merges}, {"byte_fallback", false},
                     {"ignore_merges", false}, {"unk_token", nullptr}}}};
}

std::unique_ptr<Tokenizer> tokenizer_from_gguf(const io::GgufFile& file) {
  return from_json(tokenizer_json_from_gguf(file), file.path());
}

}  // namespace headscope::tokenizer
