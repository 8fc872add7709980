// headscope — row softmax with masks, the step that turns scores into attention probabilities.
#pragma once
#include <cstdint>

namespace headscope::ops {

// Which keys a query row may attend to. Row q of a [T, T] score matrix keeps keys
// k in [lo, hi) where hi = causal ? q + 1 : T and lo = window > 0 ? max(0, hi − window) : 0;
// key_bias (may be null) is added to every score (0 or a large negative number for padding).
// softcap > 0 first replaces each kept score s by softcap · tanh(s / softcap) (Gemma 2's attention
// logit soft-capping, applied before the mask and the softmax as in transformers' Gemma2Attention).
struct KeyMask {
  bool causal = false;
  int64_t window = 0;               // sliding-window size (Mistral); 0 = unlimited
  const float* key_bias = nullptr;  // [T]
  float softcap = 0.0f;             // 0 = none
};

// In place over `rows` rows of length `cols` (row stride ld), rows numbered from `first_row`
// (the query index of the first row — the KV-cache step uses first_row = past length).
// p_k = exp(s_k − max) / Σ exp(s_j − max) over the kept keys; masked keys get exactly 0.
void softmax_rows(float* scores, int64_t rows, int64_t cols, int64_t ld, int64_t first_row, const KeyMask& mask);

}  // namespace headscope::ops
