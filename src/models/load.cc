// headscope — Model::load: finds the model's files and hands them to the family's loader.
#include <algorithm>
#include <filesystem>
#include <fstream>

#include "headscope/model.h"
#include "io/gguf.h"
#include "models/families.h"

namespace headscope {

namespace fs = std::filesystem;

namespace {

// A .gguf file, or a folder with no config.json that holds exactly one .gguf: that file; else "".
std::string gguf_file_of(const std::string& path) {
  if (fs::is_regular_file(path)) return fs::path(path).extension() == ".gguf" ? path : std::string();
  if (!fs::is_directory(path) || fs::exists(fs::path(path) / "config.json")) return {};
  std::string found;
  for (const auto& entry : fs::directory_iterator(path)) {
    if (entry.path().extension() != ".gguf") continue;
    if (!found.empty()) throw Error(path + ": several .gguf files here; pass the one to load as --model FILE.gguf");
    found = entry.path().string();
  }
  return found;
}

// GGUF files name their family in general.architecture (llama.cpp's LLM_ARCH names).
std::unique_ptr<Model> load_gguf(const std::string& file) {
  auto gguf = std::make_shared<const io::GgufFile>(file);
  const std::string arch = gguf->get_string("general.architecture");
  if (arch == "llama" || arch == "qwen2") return models::load_llama_gguf(gguf);
  if (arch == "gpt2") return models::load_gpt2_gguf(gguf);
  throw Error(file + ": GGUF architecture '" + arch + "' is not supported (supported: llama, qwen2, gpt2)");
}

}  // namespace

std::unique_ptr<Model> Model::load(const std::string& path) {
  if (path.empty()) throw Error("no model given: pass --model DIR (a Hugging Face model directory)");
  if (!fs::exists(path)) throw Error(path + ": no such file or directory");
  if (const std::string gguf = gguf_file_of(path); !gguf.empty()) return load_gguf(gguf);
  if (!fs::is_directory(path))
    throw Error(path + ": not a model directory (expected a folder with config.json, *.safetensors, tokenizer.json)");
  const fs::path config_path = fs::path(path) / "config.json";
  if (!fs::exists(config_path)) throw Error(path + ": no config.json (is this a Hugging Face model directory?)");
  std::ifstream in(config_path);
  nlohmann::json config = nlohmann::json::parse(in, nullptr, /*allow_exceptions=*/false);
  if (config.is_discarded() || !config.is_object()) throw Error(config_path.string() + ": not a valid JSON object");
  const std::string type = config.contains("model_type") && config["model_type"].is_string()
                               ? config["model_type"].get<std::string>() : std::string();
  if (type == "bert") return models::load_bert(path, config);
  if (type == "llama" || type == "mistral" || type == "qwen2") return models::load_llama(path, config);
  if (type == "gpt2") return models::load_gpt2(path, config);
  throw Error(config_path.string() + ": model_type \"" + type + "\" is not supported (supported: bert, llama, mistral, qwen2, gpt2)");
}

Encoding Model::encode(std::string_view text, bool truncate) const {
  EncodeOptions options;
  options.add_special_tokens = true;
  options.max_length = config().max_positions;
  options.truncate = truncate;
  Encoding encoding = tokenizer().encode(text, options);
  const bool any_text = std::any_of(encoding.tokens.begin(), encoding.tokens.end(), [](const Token& t) { return !t.special; });
  if (!any_text) throw Error("the text is empty (nothing but whitespace or control characters): give some words to analyse");
  return encoding;
}

}  // namespace headscope
