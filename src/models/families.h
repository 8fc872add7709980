// headscope — the model families, one file each, and the loader that picks one.
// Model::load (load.cc) reads config.json's "model_type" (or a GGUF's general.architecture)
// and calls the family's loader below.
#pragma once
#include <memory>
#include <string>

#include <nlohmann/json.hpp>

#include "headscope/error.h"
#include "headscope/model.h"

namespace headscope::io {
class GgufFile;
}

namespace headscope::models {

// A config.json field every family needs; Error naming `where` (the config file) and the key
// when it is missing, null or of the wrong type.
template <typename T>
T required(const nlohmann::json& c, const char* key, const std::string& where) {
  if (!c.contains(key) || c[key].is_null()) throw Error(where + ": missing \"" + key + "\"");
  try {
    return c[key].get<T>();
  } catch (const nlohmann::json::exception&) {
    throw Error(where + ": \"" + key + "\" has the wrong type");
  }
}

// bert.cc — BERT / sentence-transformers encoders ("bert", also MiniLM checkpoints).
std::unique_ptr<Model> load_bert(const std::string& dir, const nlohmann::json& config);

// llama.cc — the Llama family: "llama", "mistral", "qwen2" (and SmolLM, which is "llama").
std::unique_ptr<Model> load_llama(const std::string& dir, const nlohmann::json& config);
// gpt2.cc — GPT-2.
std::unique_ptr<Model> load_gpt2(const std::string& dir, const nlohmann::json& config);

// The same families from a GGUF file (general.architecture "llama", "qwen2", "gpt2").
std::unique_ptr<Model> load_llama_gguf(std::shared_ptr<const io::GgufFile> file);
std::unique_ptr<Model> load_gpt2_gguf(std::shared_ptr<const io::GgufFile> file);

}  // namespace headscope::models
