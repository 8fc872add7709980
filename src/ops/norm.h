// headscope — normalisation over the last axis: LayerNorm (BERT, GPT-2) and RMSNorm (Llama family).
#pragma once
#include <cstdint>

namespace headscope::ops {

// LayerNorm over the last axis (Ba et al. 2016): y = (x − mean) / sqrt(var + eps) · gamma + beta,
// var the biased variance. x, y: [T, d] (may alias).
void layer_norm(const float* x, int64_t T, int64_t d, const float* gamma, const float* beta, float eps, float* y);

// RMSNorm (Zhang & Sennrich 2019), as transformers' LlamaRMSNorm:
//   y = x / sqrt(mean(x²) + eps) · gamma.     x, y: [T, d] (may alias)
void rms_norm(const float* x, int64_t T, int64_t d, const float* gamma, float eps, float* y);

}  // namespace headscope::ops
