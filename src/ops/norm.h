// headscope — normalisation and pointwise activations.
#pragma once
#include <cstdint>

namespace headscope::ops {

// LayerNorm over the last axis (Ba et al. 2016): y = (x − mean) / sqrt(var + eps) · gamma + beta,
// var the biased variance. x, y: [T, d] (may alias).
void layer_norm(const float* x, int64_t T, int64_t d, const float* gamma, const float* beta, float eps, float* y);

// GELU, exact erf form as in BERT / torch.nn.functional.gelu: x · ½ · (1 + erf(x / √2)). In place.
void gelu_erf(float* x, int64_t n);

// y += x, elementwise (residual connection).
void add_inplace(float* y, const float* x, int64_t n);

}  // namespace headscope::ops
