// headscope — the model families, one file each, and the loader that picks one.
// Model::load (load.cc) reads config.json's "model_type" (or a GGUF's general.architecture)
// and calls the family's loader below.
#pragma once
#include <memory>
#include <string>

#include <nlohmann/json.hpp>

#include "headscope/model.h"

namespace headscope::models {

// bert.cc — BERT / sentence-transformers encoders ("bert", also MiniLM checkpoints).
std::unique_ptr<Model> load_bert(const std::string& dir, const nlohmann::json& config);

}  // namespace headscope::models
