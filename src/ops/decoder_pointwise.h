// headscope — the normalisation and activations of decoder blocks (Llama family, GPT-2).
#pragma once
#include <cstdint>

namespace headscope::ops {

// RMSNorm (Zhang & Sennrich 2019), as transformers' LlamaRMSNorm:
//   y = x / sqrt(mean(x²) + eps) · gamma.     x, y: [T, d] (may alias)
void rms_norm(const float* x, int64_t T, int64_t d, const float* gamma, float eps, float* y);

// SwiGLU feed-forward gate (Shazeer 2020): gate[i] = silu(gate[i]) · up[i], silu(z) = z / (1 + e^−z).
void silu_mul(float* gate, const float* up, int64_t n);

// GPT-2's GELU, the tanh approximation ("gelu_new"):
//   ½ x (1 + tanh(√(2/π) (x + 0.044715 x³))). In place.
void gelu_tanh(float* x, int64_t n);

}  // namespace headscope::ops
