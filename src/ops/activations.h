// headscope — pointwise activations of the feed-forward blocks: GELU (exact erf form for BERT, tanh
// approximation for GPT-2) and the SwiGLU gate of the Llama family.
#pragma once
#include <cstdint>

namespace headscope::ops {

// GELU, exact erf form as in BERT / torch.nn.functional.gelu: x · ½ · (1 + erf(x / √2)). In place.
void gelu_erf(float* x, int64_t n);

// GPT-2's GELU, the tanh approximation ("gelu_new"):
//   ½ x (1 + tanh(√(2/π) (x + 0.044715 x³))). In place.
void gelu_tanh(float* x, int64_t n);

// SwiGLU feed-forward gate (Shazeer 2020): gate[i] = silu(gate[i]) · up[i], silu(z) = z / (1 + e^−z).
void silu_mul(float* gate, const float* up, int64_t n);

// GeGLU feed-forward gate (Gemma): gate[i] = gelu_tanh(gate[i]) · up[i], GELU in its tanh form
// (transformers' "gelu_pytorch_tanh", the same formula as gelu_tanh above).
void gelu_tanh_mul(float* gate, const float* up, int64_t n);

// Soft-capping (Gemma 2): x[i] = cap · tanh(x[i] / cap), which bounds |x| below cap. In place.
void soft_cap(float* x, int64_t n, float cap);

}  // namespace headscope::ops
