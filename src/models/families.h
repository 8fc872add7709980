// headscope — the model families, one file each, and the loader that picks one.
// Model::load (load.cc) reads config.json's "model_type" (or a GGUF's general.architecture)
// and calls the family's loader below.
#pragma once
#include <memory>
#include <string>

#include <nlohmann/json.hpp>

#include "headscope/model.h"

namespace headscope::io {
class GgufFile;
}

namespace headscope::models {

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
