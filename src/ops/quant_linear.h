// headscope — y = x · Wᵀ + b with W kept as the model file stores it (tensor/quant_matrix.h),
// dequantised panel by panel inside the product.
//
// For each panel of at most kQuantPanelRows output rows (fewer, so that every thread gets as many): dequantise the
// panel into an fp32 scratch of the thread that owns it, then y[:, panel] = x · panelᵀ with the same sgemm as
// ops::linear. Panels are shared between threads (OpenMP, static schedule) and each sgemm runs on its thread. Every
// output element is a dot product over the same fp32 weights as dequantize-then-multiply (the
// slow twin, ops::reference::quant_linear); the two agree to sgemm's rounding
// (tests/unit/quant_linear_test.cc). An fp32 matrix goes straight to ops::linear. Up to
// kGemvMaxRows rows of x (a generation step) take ops::quant_gemv instead, which reads each
// weight once and writes no scratch.
#pragma once
#include <cstdint>

#include "tensor/quant_matrix.h"

namespace headscope::ops {

// Output rows dequantised at a time: at most kQuantPanelRows, and at most kQuantPanelBytes of fp32
// (a matrix 14,336 wide gets panels of 73 rows). Every sgemm call packs all of x again, so fewer,
// larger panels cost less than panels that stay in L2: SmolLM2-135M Q4_1 with attention and hidden
// states captured (bench/decoder_bench, Zen 4) took 305-330 ms at T = 128 on one thread and
// 176-183 on two with 256-row panels, against 372-403 and 222-237 with 64-row panels; 512 and
// whole-matrix panels were no faster.
constexpr int64_t kQuantPanelRows = 256;
constexpr int64_t kQuantPanelBytes = int64_t{4} << 20;

// How an `out` × `in` matrix is cut into panels of output rows: at most `max_rows` rows and
// kQuantPanelBytes of fp32 each, and as many panels as a multiple of `threads`, so that none
// waits for the others at the end (576 rows on two threads are four panels of 144 rather than
// 256, 256 and 64). Panel p holds rows [p · rows, min(out, (p + 1) · rows)). The product and
// its transpose (ops::quant_linear_backward) cut their panels here.
struct QuantPanels {
  int64_t rows = 0;   // rows per panel (the last may hold fewer)
  int64_t count = 0;  // number of panels
};
QuantPanels quant_panels(int64_t out, int64_t in, int64_t threads, int64_t max_rows = kQuantPanelRows);

// y[T, W.rows()] = x[T, W.cols()] · Wᵀ + bias (bias may be null). `gemv_for_few_rows` false
// keeps the panel sgemm at every T, and runs fewer than kSameKernelMinRows rows as that many
// (zeros after them), so that a row's result does not depend on how many rows come with it (a
// packed pass, Model::run_batch; tests/unit/batch_test.cc checks it bit for bit).
constexpr int64_t kSameKernelMinRows = 16;
void quant_linear(const float* x, int64_t T, const QuantMatrix& W, const float* bias, float* y,
                  bool gemv_for_few_rows = true);

}  // namespace headscope::ops
