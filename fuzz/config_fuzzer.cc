// libFuzzer target: a config.json read by every model family's pure config reader
// (models/families.h) — the numbers that size everything else. Whatever a reader accepts must be
// a shape the forward pass can use: positive sizes within the budgets of limits.h, heads that
// divide the width. A crash, an exception other than Error, or a reader that lets a budget-breaking
// number through is a finding.
#include <cstdlib>
#include <nlohmann/json.hpp>

#include "fuzz_support.h"
#include "headscope/limits.h"
#include "models/families.h"

namespace {
void check(const headscope::ModelConfig& c) {
  using namespace headscope::limits;
  if (c.n_layer < 1 || c.n_layer > kMaxLayers || c.n_head < 1 || c.n_head > kMaxHeads) std::abort();
  if (c.d_model < 1 || c.d_model > kMaxModelWidth || c.d_head < 1 || c.d_head > kMaxHeadWidth) std::abort();
  if (c.vocab_size < 1 || c.vocab_size > kMaxVocabulary || c.max_positions < 1 || c.max_positions > kMaxPositions) std::abort();
  if (!(c.norm_eps > 0.0f)) std::abort();
}
}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace headscope;
  const nlohmann::json j = nlohmann::json::parse(data, data + size, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) return 0;
  fuzz::expect_ok_or_error([&] { check(models::bert_config(j, "config.json")); });
  fuzz::expect_ok_or_error([&] { check(models::llama_config(j, "config.json").cfg); });
  fuzz::expect_ok_or_error([&] { check(models::gpt2_config(j, "config.json").cfg); });
  return 0;
}
