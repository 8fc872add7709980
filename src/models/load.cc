// headscope — Model::load: finds the model's files and hands them to the family's loader.
#include <algorithm>
#include <filesystem>
#include <fstream>

#include "headscope/model.h"
#include "models/families.h"

namespace headscope {

namespace fs = std::filesystem;

std::unique_ptr<Model> Model::load(const std::string& path) {
  if (path.empty()) throw Error("no model given: pass --model DIR (a Hugging Face model directory)");
  if (!fs::exists(path)) throw Error(path + ": no such file or directory");
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
  throw Error(config_path.string() + ": model_type \"" + type + "\" is not supported (supported: bert)");
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
