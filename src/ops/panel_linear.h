// headscope — y = x · Wᵀ + b for a few rows (short inputs), streaming W once from memory.
//
// With T ≲ 32 rows a linear layer does only 2·T flops per weight, and a model's weights (42.5 MB
// of fp32 for all-MiniLM-L6-v2) are larger than the cache share a core gets, so every pass reads
// them from DRAM. A general GEMM kernel reads its weight blocks as several interleaved streams and
// the hardware prefetcher does not keep up: measured on a Zen 3 core (AVX2), the default model's 24
// linear layers at T = 16 take 5.1–5.5 ms through oneDNN's 1×1-convolution kernel, against 3.6 ms
// once each weight is read exactly once, in order, with software prefetch ahead of the loads.
//
// Layout: W [out, in] is repacked once into panels of kPanel output features, [out/kPanel][in][kPanel]
// (the last panel zero-padded), so a layer's weights are one sequential stream. x is transposed
// into blocks of 16 rows, xᵀ [in][16], which stay in L1/L2. The kernel keeps a 6 × 16 tile of
// yᵀ in twelve AVX registers: per input feature, two loads of xᵀ, six broadcasts of weights and
// twelve FMAs; the sum over `in` runs in order, starting from the bias.
// Variants by instruction set (panel_kernels.h; chosen per call from cpu::active_isa()): AVX2 +
// FMA as above; AVX-512F with one 16-float register per tile column and even/odd accumulators;
// portable, a scalar loop over the same panels.
// The slow twin is ops::reference::matmul (tests/unit/ops_test.cc compares every variant with it).
#pragma once
#include <cstdint>

#include "headscope/tensor.h"

namespace headscope::ops {

// True when the active path (cpu::active_isa()) has a vector variant (AVX2 + FMA or AVX-512F);
// otherwise callers should use a GEMM, which is faster than the portable variant.
bool panel_linear_available();

constexpr int64_t kPanel = 6;  // output features per panel

// W [out, in] → panels [ceil(out / kPanel), in, kPanel].
Tensor pack_panels(const Tensor& W);

// y[T, out] = x[T, in] · Wᵀ + bias (bias may be null), W given as pack_panels(W). Threads share
// the panels (OpenMP, static schedule).
void panel_linear(const Tensor& panels, const float* bias, int64_t in, int64_t out, const float* x, int64_t T,
                  float* y);

}  // namespace headscope::ops
