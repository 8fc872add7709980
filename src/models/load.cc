// headscope — Model::load: finds the model's files and hands them to the family's loader.
#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>

#include "headscope/limits.h"
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

// GGUF files name their family in general.architecture (llama.cpp's LLM_ARCH names). The display
// name is the folder's name when a folder was given (the repository's name, as downloaded), else
// the file's name without ".gguf"; general.name is left aside (often a training run's name).
std::unique_ptr<Model> load_gguf(const std::string& file, const std::string& given, models::WeightCheck& check) {
  const fs::path g = fs::path(given).lexically_normal();
  const std::string name = fs::is_directory(given) ? (g.has_filename() ? g : g.parent_path()).filename().string()
                                                   : fs::path(file).stem().string();
  auto gguf = std::make_shared<const io::GgufFile>(file);
  const std::string arch = gguf->get_string("general.architecture");
  if (arch == "llama" || arch == "qwen2" || arch == "qwen3") return models::load_llama_gguf(gguf, name, check);
  if (arch == "gemma" || arch == "gemma2" || arch == "gemma3") return models::load_gemma_gguf(gguf, name, check);
  if (arch == "gpt2") return models::load_gpt2_gguf(gguf, name, check);
  if (arch == "phi3") return models::load_phi3_gguf(gguf, name, check);
  if (arch == "olmo2") return models::load_olmo2_gguf(gguf, name, check);
  throw Error(file + ": GGUF architecture '" + arch +
              "' is not supported (supported: llama, qwen2, qwen3, gemma, gemma2, gemma3, gpt2)");
}

std::unique_ptr<Model> load_family(const std::string& path, models::WeightCheck& check) {
  if (path.empty()) throw Error("no model given: pass --model DIR (a Hugging Face model directory)");
  if (!fs::exists(path)) throw Error(path + ": no such file or directory");
  if (const std::string gguf = gguf_file_of(path); !gguf.empty()) return load_gguf(gguf, path, check);
  if (!fs::is_directory(path))
    throw Error(path + ": not a model directory (expected a folder with config.json, *.safetensors, tokenizer.json)");
  const fs::path config_path = fs::path(path) / "config.json";
  if (!fs::exists(config_path)) throw Error(path + ": no config.json (is this a Hugging Face model directory?)");
  std::error_code ec;
  if (const uintmax_t size = fs::file_size(config_path, ec); !ec && size > limits::kMaxConfigBytes)
    throw ResourceError(config_path.string() + ": " + std::to_string(size) + " bytes, more than the " +
                        std::to_string(limits::kMaxConfigBytes) + " a config.json may have (is it the right file?)");
  std::ifstream in(config_path);
  nlohmann::json config = nlohmann::json::parse(in, nullptr, /*allow_exceptions=*/false);
  if (config.is_discarded() || !config.is_object()) throw Error(config_path.string() + ": not a valid JSON object");
  const std::string type = config.contains("model_type") && config["model_type"].is_string()
                               ? config["model_type"].get<std::string>() : std::string();
  if (type == "bert") return models::load_bert(path, config, check);
  if (type == "llama" || type == "mistral" || type == "qwen2" || type == "qwen3") return models::load_llama(path, config, check);
  if (type == "gemma" || type == "gemma2" || type == "gemma3_text" || type == "gemma3")
    return models::load_gemma(path, config, check);
  if (type == "gpt2") return models::load_gpt2(path, config, check);
  if (type == "phi3") return models::load_phi3(path, config, check);
  if (type == "olmo2") return models::load_olmo2(path, config, check);
  throw Error(config_path.string() + ": model_type \"" + type + "\" is not supported (supported: bert, llama, mistral, qwen2, qwen3, gemma, gemma2, gemma3_text, gemma3, gpt2)");
}

}  // namespace

namespace models {

void WeightCheck::operator()(const Tensor& t, const std::string& name, const std::string& file) {
  for (int64_t d : t.shape)
    if (d <= 0)
      throw Error(file + ": tensor '" + name + "' has shape " + t.shape_str() +
                  "; every dimension of a model weight must be positive (corrupt file?)");
  // One pass over the converted fp32 values (~0.1 s for a 135M-parameter model).
  size_t nan = 0, inf = 0;
  for (float v : t.data) {
    nan += std::isnan(v);
    inf += std::isinf(v);
  }
  if (nan + inf == 0) return;
  const std::string what = file + ": tensor '" + name + "' has " + std::to_string(nan + inf) + " non-finite values (" +
                           std::to_string(nan) + " NaN, " + std::to_string(inf) + " Inf) among " +
                           std::to_string(t.numel());
  if (strict_) throw Error(what + "; refused under --strict (the file is damaged, or was saved after a diverged run)");
  if (warnings_.size() < limits::kMaxLoadWarnings) warnings_.push_back(what + "; outputs that depend on it will be NaN");
  else ++more_;
}

std::vector<std::string> WeightCheck::warnings() const {
  std::vector<std::string> out = warnings_;
  if (more_ > 0) out.push_back(std::to_string(more_) + " more tensors have non-finite values");
  return out;
}

}  // namespace models

std::unique_ptr<Model> Model::load(const std::string& path, const LoadOptions& options) {
  models::WeightCheck check(options.strict);
  std::unique_ptr<Model> model = load_family(path, check);
  model->warnings_ = check.warnings();
  model->options_ = options;
  return model;
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
