#include "ops/panel_linear.h"

#include "cpu/isa.h"
#include "headscope/error.h"
#include "ops/panel_kernels.h"

namespace headscope::ops {

Tensor pack_panels(const Tensor& W) {
  const int64_t out = W.dim(0), in = W.dim(1);
  const int64_t n_panels = (out + kPanel - 1) / kPanel;
  Tensor panels({n_panels, in, kPanel}, Tensor::Uninitialized{});
  float* p = panels.ptr();
  for (int64_t panel = 0; panel < n_panels; ++panel)
    for (int64_t k = 0; k < in; ++k)
      for (int64_t j = 0; j < kPanel; ++j) {
        const int64_t o = panel * kPanel + j;
        p[(panel * in + k) * kPanel + j] = o < out ? W.ptr()[o * in + k] : 0.0f;
      }
  return panels;
}

bool panel_linear_available() { return cpu::active_isa() >= cpu::Isa::avx2; }

namespace {

// The portable variant: the same panels, one output at a time, the sum over `in` in order from
// the bias. Slower than the GEMM that PackedLinear takes when panel_linear_available() is false;
// it is here so that the call works, and is tested, on every path.
void panel_linear_portable(const float* w, const float* bias, int64_t in, int64_t out, const float* x, int64_t T,
                           float* y) {
  for (int64_t t = 0; t < T; ++t)
    for (int64_t o = 0; o < out; ++o) {
      const float* wo = w + (o / kPanel) * in * kPanel + o % kPanel;
      float sum = bias ? bias[o] : 0.0f;
      for (int64_t k = 0; k < in; ++k) sum += wo[k * kPanel] * x[t * in + k];
      y[t * out + o] = sum;
    }
}

}  // namespace

void panel_linear(const Tensor& panels, const float* bias, int64_t in, int64_t out, const float* x, int64_t T,
                  float* y) {
  const int64_t n_panels = (out + kPanel - 1) / kPanel;
  panels.expect_shape({n_panels, in, kPanel}, "panel_linear weights");
  static_assert(kPanel == 6, "the vector variants (panel_kernels.h) are written for panels of 6");
  if (T <= 0) return;
  const cpu::Isa isa = cpu::active_isa();
  if (isa == cpu::Isa::portable) return panel_linear_portable(panels.ptr(), bias, in, out, x, T, y);
#if defined(__x86_64__)
  // xᵀ in blocks of 16 rows: [blocks, in, 16], rows past T zero (written by the variant's
  // transpose, so the buffer needs no fill of its own).
  const int64_t rows = kernels::kPanelBlockRows, blocks = (T + rows - 1) / rows;
  Tensor xT({blocks, in, rows}, Tensor::Uninitialized{});
  if (isa == cpu::Isa::avx512) return kernels::panel_linear_avx512(panels.ptr(), bias, in, out, x, T, y, xT.ptr());
  return kernels::panel_linear_avx2(panels.ptr(), bias, in, out, x, T, y, xT.ptr());
#endif
}

}  // namespace headscope::ops
