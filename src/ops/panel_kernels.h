// headscope — the instruction-set variants of ops::panel_linear (panel_linear.h). Each is
// compiled in its own file with its instruction set's flags (CMakeLists.txt), so the rest of the
// binary does not need that set; panel_linear.cc picks one per call from cpu::active_isa().
//
// These files see raw pointers only and keep every helper in an anonymous namespace: an inline
// function shared with other files (a Tensor accessor, a std:: template) compiled here with
// AVX-512 flags could be the copy the linker keeps for the whole binary.
#pragma once
#include <cstdint>

namespace headscope::ops::kernels {

// Rows of x per block: xᵀ is passed in as scratch of [ceil(T / 16), in, 16] floats.
constexpr int64_t kPanelBlockRows = 16;

// y[T, out] = x[T, in] · Wᵀ + bias (bias may be null); w is pack_panels(W)'s data, xT the scratch.
void panel_linear_avx2(const float* w, const float* bias, int64_t in, int64_t out, const float* x, int64_t T, float* y,
                       float* xT);
void panel_linear_avx512(const float* w, const float* bias, int64_t in, int64_t out, const float* x, int64_t T,
                         float* y, float* xT);

}  // namespace headscope::ops::kernels
