// headscope — Tokenizer::from_model_dir / from_tokenizer_json: read tokenizer.json and assemble a
// PipelineTokenizer from its components.
//
// tokenizer.json (the Hugging Face `tokenizers` serialization) is one object:
//   "model":          {"type": "WordPiece" | "BPE" | ..., "vocab": {...}, ...}
//   "normalizer":     {"type": ...} or null
//   "pre_tokenizer":  {"type": ...} or null
//   "post_processor": {"type": ...} or null
//   "added_tokens":   [{"id", "content", "special", "single_word", "lstrip", "rstrip", "normalized"}]
//   "truncation", "padding": training/serving defaults of the file; not applied here, the caller
//                    chooses the length limit through EncodeOptions.
//   "decoder":        only used to turn ids back into text; not needed for encoding.
// Each component is read by the function registered for its "type" in the tables below; to support
// a new type, declare its reader in its own header (e.g. tokenizer/bpe.h) and add one line.
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string_view>

#include "headscope/error.h"
#include "headscope/limits.h"
#include "headscope/tokenizer.h"
#include "tokenizer/bpe.h"
#include "tokenizer/normalizers.h"
#include "tokenizer/pipeline.h"
#include "tokenizer/post_processors.h"
#include "tokenizer/pre_tokenizers.h"
#include "tokenizer/precompiled.h"
#include "tokenizer/unigram.h"
#include "tokenizer/wordpiece.h"

namespace headscope {
namespace {

using tokenizer::Model;
using tokenizer::Normalizer;
using tokenizer::PostProcessor;
using tokenizer::PreTokenizer;

template <typename Result>
struct Reader {
  std::string_view type;
  Result (*read)(const nlohmann::json& component, const std::string& path);
};

constexpr Reader<std::unique_ptr<Model>> kModels[] = {
    {"WordPiece", tokenizer::read_wordpiece_model},
    {"BPE", tokenizer::read_bpe_model},
    {"Unigram", tokenizer::read_unigram_model},
};
constexpr Reader<std::unique_ptr<Normalizer>> kNormalizers[] = {
    {"BertNormalizer", tokenizer::read_bert_normalizer},
    {"Sequence", tokenizer::read_sequence_normalizer},
    {"Prepend", tokenizer::read_prepend_normalizer},
    {"Replace", tokenizer::read_replace_normalizer},
    {"NFD", tokenizer::read_nfd_normalizer},
    {"Lowercase", tokenizer::read_lowercase_normalizer},
    {"Precompiled", tokenizer::read_precompiled_normalizer},
};
constexpr Reader<std::unique_ptr<PreTokenizer>> kPreTokenizers[] = {
    {"BertPreTokenizer", tokenizer::read_bert_pre_tokenizer},
    {"Sequence", tokenizer::read_sequence_pre_tokenizer},
    {"ByteLevel", tokenizer::read_byte_level_pre_tokenizer},
    {"Split", tokenizer::read_split_pre_tokenizer},
    {"Digits", tokenizer::read_digits_pre_tokenizer},
    {"Metaspace", tokenizer::read_metaspace_pre_tokenizer},
    {"Whitespace", tokenizer::read_whitespace_pre_tokenizer},
    {"WhitespaceSplit", tokenizer::read_whitespace_split_pre_tokenizer},
};
constexpr Reader<PostProcessor> kPostProcessors[] = {
    {"TemplateProcessing", tokenizer::read_template_processing}, {"BertProcessing", tokenizer::read_bert_processing},
    {"ByteLevel", tokenizer::read_byte_level_processing},        {"Sequence", tokenizer::read_sequence_processing},
    {"RobertaProcessing", tokenizer::read_roberta_processing},
};

// Finds the reader for component["type"]; `what` names the component in messages.
template <typename Result, size_t N>
Result read_component(const Reader<Result> (&table)[N], const nlohmann::json& component, std::string_view what,
                      const std::string& path) {
  if (!component.is_object() || !component.contains("type") || !component.at("type").is_string()) {
    throw Error(path + ": \"" + std::string(what) + "\" has no \"type\"");
  }
  const std::string type = component.at("type").get<std::string>();
  std::string known;
  for (const Reader<Result>& r : table) {
    if (r.type == type) return r.read(component, path);
    known += (known.empty() ? "" : ", ") + std::string(r.type);
  }
  throw Error(path + ": " + std::string(what) + " type '" + type + "' is not supported (supported: " + known + ")");
}

std::string read_file(const std::string& path) {
  std::error_code ec;
  const auto size = std::filesystem::file_size(path, ec);
  if (!ec && size > static_cast<uintmax_t>(limits::kMaxTokenizerFileBytes)) {
    throw ResourceError(path + ": " + std::to_string(size) + " bytes, more than the " +
                        std::to_string(limits::kMaxTokenizerFileBytes) + " a tokenizer file may have");
  }
  std::ifstream in(path, std::ios::binary);
  if (!in) throw Error(path + ": cannot open file");
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// The readers recurse once per level of a Sequence component, so the document's nesting is
// bounded before any of them runs. Walks with an explicit stack; names the first value found
// deeper than the limit by its path, e.g. pre_tokenizer.pretokenizers[0].pretokenizers[0]...
void check_nesting(const nlohmann::json& root, const std::string& path) {
  struct Frame {
    const nlohmann::json* value;
    std::string where;
    int depth;
  };
  std::vector<Frame> stack{{&root, "", 0}};
  while (!stack.empty()) {
    Frame f = std::move(stack.back());
    stack.pop_back();
    if (!f.value->is_structured()) continue;
    if (f.depth >= limits::kMaxTokenizerJsonDepth) {
      throw Error(path + ": " + (f.where.empty() ? std::string("the document") : f.where) + " is nested deeper than " +
                  std::to_string(limits::kMaxTokenizerJsonDepth) + " levels; the file is corrupt or hostile");
    }
    if (f.value->is_object()) {
      for (const auto& [key, child] : f.value->items()) {
        if (child.is_structured()) stack.push_back({&child, f.where + (f.where.empty() ? "" : ".") + key, f.depth + 1});
      }
    } else {
      size_t i = 0;
      for (const nlohmann::json& child : *f.value) {
        if (child.is_structured()) stack.push_back({&child, f.where + "[" + std::to_string(i) + "]", f.depth + 1});
        ++i;
      }
    }
  }
}

}  // namespace

// One component through its table; the Sequence readers (tokenizer/pre_tokenizers.cc) use these.
std::unique_ptr<tokenizer::Normalizer> tokenizer::read_normalizer(const nlohmann::json& spec, const std::string& path) {
  return read_component(kNormalizers, spec, "normalizer", path);
}
std::unique_ptr<tokenizer::PreTokenizer> tokenizer::read_pre_tokenizer(const nlohmann::json& spec,
                                                                       const std::string& path) {
  return read_component(kPreTokenizers, spec, "pre_tokenizer", path);
}
tokenizer::PostProcessor tokenizer::read_post_processor(const nlohmann::json& spec, const std::string& path) {
  return read_component(kPostProcessors, spec, "post_processor", path);
}

std::unique_ptr<Tokenizer> Tokenizer::from_tokenizer_json(const std::string& path) {
  return from_json_string(read_file(path), path);
}

std::unique_ptr<Tokenizer> Tokenizer::from_json_string(std::string_view contents, const std::string& source) {
  if (contents.size() > static_cast<size_t>(limits::kMaxTokenizerFileBytes)) {
    throw ResourceError(source + ": " + std::to_string(contents.size()) + " bytes, more than the " +
                        std::to_string(limits::kMaxTokenizerFileBytes) + " a tokenizer file may have");
  }
  nlohmann::json root;
  try {
    root = nlohmann::json::parse(contents);
  } catch (const nlohmann::json::exception& e) {
    throw Error(source + ": not valid JSON (" + e.what() + ")");
  }
  return tokenizer::from_json(root, source);
}

std::unique_ptr<Tokenizer> tokenizer::from_json(const nlohmann::json& root, const std::string& path) {
  if (!root.is_object() || !root.contains("model")) throw Error(path + ": not a tokenizer.json (no \"model\")");
  check_nesting(root, path);
  try {
    tokenizer::PipelineTokenizer::Parts parts;
    parts.source = path;
    parts.model = read_component(kModels, root.at("model"), "model", path);
    if (root.contains("normalizer") && !root.at("normalizer").is_null()) {
      parts.normalizer = read_component(kNormalizers, root.at("normalizer"), "normalizer", path);
    }
    if (root.contains("pre_tokenizer") && !root.at("pre_tokenizer").is_null()) {
      parts.pre_tokenizer = read_component(kPreTokenizers, root.at("pre_tokenizer"), "pre_tokenizer", path);
    }
    if (root.contains("post_processor") && !root.at("post_processor").is_null()) {
      parts.post_processor = read_component(kPostProcessors, root.at("post_processor"), "post_processor", path);
    }
    if (root.contains("added_tokens")) parts.added_tokens = tokenizer::read_added_tokens(root.at("added_tokens"), path);
    if (root.contains("decoder")) parts.decode_style = tokenizer::decode_style_of(root.at("decoder"));
    return std::make_unique<tokenizer::PipelineTokenizer>(std::move(parts));
  } catch (const nlohmann::json::exception& e) {
    throw Error(path + ": unexpected content (" + e.what() + ")");
  }
}

std::string token_display(std::string_view text, const Token& token) {
  const auto n = static_cast<int64_t>(text.size());
  if (token.special || token.begin >= token.end || token.begin < 0 || token.end > n) return token.text;
  const auto continuation = [&](int64_t i) {
    return i < n && (static_cast<unsigned char>(text[size_t(i)]) & 0xC0) == 0x80;
  };
  int64_t b = token.begin, e = token.end;
  while (b > 0 && continuation(b)) --b;  // a byte-level token may start or end inside a character
  while (continuation(e)) ++e;
  std::string_view slice = text.substr(size_t(b), size_t(e - b));
  const auto space = [](char c) { return c == ' ' || c == '\n' || c == '\t' || c == '\r'; };
  size_t first = 0, last = slice.size();
  while (first < last && space(slice[first])) ++first;
  while (last > first && space(slice[last - 1])) --last;
  std::string out;
  if (first == last) {
    for (char c : slice) out += c == '\n' ? "↵" : c == '\t' ? "⇥" : c == '\r' ? "" : "␣";
    return out.empty() ? token.text : out;
  }
  if (token.text.rfind("##", 0) == 0) out = "##";
  out.append(slice.substr(first, last - first));
  return out;
}

std::string Tokenizer::decode(const std::vector<int32_t>& ids) const {
  std::string out;
  for (int32_t id : ids) out += token_text(id);
  return out;
}

std::unique_ptr<Tokenizer> Tokenizer::from_model_dir(const std::string& model_dir) {
  namespace fs = std::filesystem;
  const fs::path dir(model_dir);
  if (fs::exists(dir / "tokenizer.json")) return from_tokenizer_json((dir / "tokenizer.json").string());
  if (fs::exists(dir / "vocab.txt")) return tokenizer::read_wordpiece_vocab_dir(model_dir);
  throw Error(model_dir +
              ": no tokenizer.json or vocab.txt in this folder; copy the model's tokenizer files next to its weights");
}

}  // namespace headscope
