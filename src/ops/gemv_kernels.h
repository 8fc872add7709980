// headscope — the instruction-set variants of ops::quant_gemv's row kernels (quant_gemv.h). Each
// set is compiled in its own file with its instruction set's flags and sees raw pointers only
// (the reason is in panel_kernels.h); quant_gemv.cc picks the set from cpu::active_isa().
#pragma once
#include <cstdint>

namespace headscope::ops::kernels {

// sums[t] = Σ_k w[k] · x[t · n + k] for t < T (1 ≤ T ≤ kGemvMaxRows) over one row of W of n
// values, stored as ggml blocks of one type (the layouts are in io/gguf_quants.cc) ...
using BlockRowDot = void (*)(const uint8_t* blocks, int64_t n, const float* x, int T, float* sums);
// ... or as fp32 (a row the caller dequantised).
using FloatRowDot = void (*)(const float* w, int64_t n, const float* x, int T, float* sums);

// One path's kernels; a null entry means "no block kernel for this type here": the caller then
// dequantises the row and calls f32.
struct GemvKernels {
  BlockRowDot q4_0 = nullptr, q4_1 = nullptr, q5_0 = nullptr, q8_0 = nullptr, q4_k = nullptr, q6_k = nullptr;
  FloatRowDot f32 = nullptr;
};

GemvKernels gemv_kernels_avx2();
GemvKernels gemv_kernels_avx512();

}  // namespace headscope::ops::kernels
