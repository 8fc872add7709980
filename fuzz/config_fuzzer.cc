// libFuzzer target: a config.json read by every model family's pure config reader
// (models/families.h, models/llama_like.h) — the numbers that size everything else. Whatever a
// reader accepts must be a shape the forward pass can use: positive sizes within the budgets of
// limits.h, heads that divide the width, one window per layer. A crash, an exception other than
// Error, or a reader that lets a budget-breaking number through is a finding. Gemma's reader is
// private to gemma.cc; load_gemma reaches it first, then stops at the missing tokenizer (Error).
#include <cstdlib>
#include <nlohmann/json.hpp>

#include "fuzz_support.h"
#include "headscope/limits.h"
#include "models/families.h"
#include "models/llama_like.h"

namespace {
void check(const headscope::ModelConfig& c) {
  using namespace headscope::limits;
  if (c.n_layer < 1 || c.n_layer > kMaxLayers || c.n_head < 1 || c.n_head > kMaxHeads) std::abort();
  if (c.d_model < 1 || c.d_model > kMaxModelWidth || c.d_head < 1 || c.d_head > kMaxHeadWidth) std::abort();
  if (c.vocab_size < 1 || c.vocab_size > kMaxVocabulary || c.max_positions < 1 || c.max_positions > kMaxPositions)
    std::abort();
  if (!(c.norm_eps > 0.0f)) std::abort();
}
void check(const headscope::models::DecoderHyper& hp) {
  check(hp.cfg);
  if (!hp.window.empty() && hp.window.size() != size_t(hp.cfg.n_layer)) std::abort();
  for (int64_t w : hp.window)
    if (w < 0 || w > headscope::limits::kMaxPositions) std::abort();
}
}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace headscope;
  const nlohmann::json j = nlohmann::json::parse(data, data + size, nullptr, /*allow_exceptions=*/false);
  // load.cc refuses a config.json that is not a JSON object before any reader sees it.
  if (j.is_discarded() || !j.is_object()) return 0;
  const std::string where = "config.json";
  fuzz::expect_ok_or_error([&] { check(models::bert_config(j, where)); });
  fuzz::expect_ok_or_error([&] {
    const models::RobertaHyper hp = models::roberta_config(j, where);
    check(hp.cfg);
    if (hp.padding_idx < 0 || hp.padding_idx + 1 + int64_t(hp.cfg.max_positions) != hp.position_rows) std::abort();
  });
  fuzz::expect_ok_or_error([&] { check(models::distilbert_config(j, where)); });
  fuzz::expect_ok_or_error([&] { check(models::llama_like_config(j, where, models::LlamaLikeDefaults{})); });
  fuzz::expect_ok_or_error([&] { check(models::llama_config(j, where)); });
  fuzz::expect_ok_or_error([&] { check(models::gpt2_config(j, where)); });
  fuzz::expect_ok_or_error([&] { check(models::phi3_config(j, where)); });
  fuzz::expect_ok_or_error([&] { check(models::olmo2_config(j, where)); });
  fuzz::expect_ok_or_error([&] {
    models::WeightCheck weights(/*strict=*/true);
    (void)models::load_gemma("/nonexistent-headscope-fuzz", j, weights);
  });
  return 0;
}
