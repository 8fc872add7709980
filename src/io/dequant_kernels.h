// headscope — the instruction-set variants of io::dequantize_row's block kernels (gguf_quants.h).
// Each set is compiled in its own file with its instruction set's flags and sees raw pointers
// only (the reason is in ops/panel_kernels.h); gguf_quants.cc picks the set from
// cpu::active_isa() and keeps its scalar loops as the portable path and the slow twin.
//
// Every variant writes the same floats as the scalar loop, bit for bit: a value is an integer
// times one or two f16-derived scales, products exact in fp32, then at most one add or subtract,
// done as in the scalar code (the argument is at the top of gguf_quants.cc).
#pragma once
#include <cstdint>

namespace headscope::io::kernels {

// Turns `nb` blocks at x (the layouts are in gguf_quants.cc) into nb · block-size floats at y.
using BlockDequant = void (*)(const uint8_t* x, float* y, int64_t nb);

// One path's kernels; a null entry means "no kernel for this type here": the caller then runs the
// scalar loop.
struct DequantKernels {
  BlockDequant q4_0 = nullptr, q4_1 = nullptr, q5_0 = nullptr, q5_1 = nullptr, q8_0 = nullptr;
  BlockDequant q2_k = nullptr, q3_k = nullptr, q4_k = nullptr, q5_k = nullptr, q6_k = nullptr;
};

DequantKernels dequant_kernels_avx2();
DequantKernels dequant_kernels_avx512();

}  // namespace headscope::io::kernels
