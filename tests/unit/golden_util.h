// Reading the decoder goldens that tests/reference/reference_models.py writes: per model folder,
// golden/manifest.json {"prompts": [{"text", "ids", "tensors": {name: {"file", "shape"}}}]} and
// little-endian float32 files in C order. Shared by the decoder, encoder and BERT GGUF suites.
#pragma once
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "headscope/model.h"

namespace headscope::testing {

struct GoldenPrompt {
  std::string text;
  std::vector<int32_t> ids;
  Tensor attention, hidden_states, logits;  // [n_layer, n_head, T, T], [n_layer + 1, T, d_model], [T or 1, vocab]
};

// One tensor of the manifest (`entry`: {"file", "shape"}) from `dir`.
inline Tensor read_f32(const std::filesystem::path& dir, const nlohmann::json& entry) {
  Tensor t(entry.at("shape").get<std::vector<int64_t>>());
  std::ifstream in(dir / entry.at("file").get<std::string>(), std::ios::binary);
  in.read(reinterpret_cast<char*>(t.ptr()), static_cast<std::streamsize>(t.numel() * 4));
  EXPECT_TRUE(in.good()) << "cannot read " << entry.dump();
  return t;
}

// Every prompt of `model_dir`/golden (a test failure, and none, when the goldens are missing).
inline std::vector<GoldenPrompt> read_goldens(const std::filesystem::path& model_dir) {
  const std::filesystem::path dir = model_dir / "golden";
  std::ifstream in(dir / "manifest.json");
  if (!in) {
    ADD_FAILURE() << "missing " << dir / "manifest.json"
                  << "; run `make goldens`";
    return {};
  }
  const nlohmann::json manifest = nlohmann::json::parse(in);
  std::vector<GoldenPrompt> prompts;
  for (size_t p = 0; p < manifest.at("prompts").size(); ++p) {
    const nlohmann::json& j = manifest["prompts"][p];
    const std::string tag = "p" + std::to_string(p) + "_";
    prompts.push_back({j.at("text").get<std::string>(), j.at("ids").get<std::vector<int32_t>>(),
                       read_f32(dir, j["tensors"][tag + "attention"]),
                       read_f32(dir, j["tensors"][tag + "hidden_states"]),
                       read_f32(dir, j["tensors"][tag + "logits"])});
  }
  return prompts;
}

// Token ids as an Encoding (no text, no offsets), to run a model on exactly the golden's ids.
inline Encoding encoding_of(const std::vector<int32_t>& ids) {
  Encoding e;
  for (int32_t id : ids) e.tokens.push_back({id, "", 0, 0, false, -1});
  return e;
}

inline float max_abs_diff(const float* a, const float* b, int64_t n) {
  float m = 0.0f;
  for (int64_t i = 0; i < n; ++i) m = std::max(m, std::abs(a[i] - b[i]));
  return m;
}

inline float max_abs(const Tensor& t) {
  float m = 0.0f;
  for (float v : t.data) m = std::max(m, std::abs(v));
  return m;
}

}  // namespace headscope::testing
