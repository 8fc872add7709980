#include "ops/quant_linear.h"

#include <omp.h>
#include <algorithm>
#include <exception>
#include <vector>

#include "ops/matmul.h"
#include "ops/quant_gemv.h"

namespace headscope::ops {

QuantPanels quant_panels(int64_t out, int64_t in, int64_t threads, int64_t max_rows) {
  if (out <= 0 || in <= 0) return {};
  const int64_t rows =
      std::clamp<int64_t>(kQuantPanelBytes / (int64_t(sizeof(float)) * in), 1, std::max<int64_t>(1, max_rows));
  int64_t count = (out + rows - 1) / rows;
  count = (count + threads - 1) / threads * threads;
  QuantPanels p;
  p.rows = (out + count - 1) / count;
  p.count = (out + p.rows - 1) / p.rows;
  return p;
}

void quant_linear(const float* x, int64_t T, const QuantMatrix& W, const float* bias, float* y,
                  bool gemv_for_few_rows) {
  const int64_t in = W.cols(), out = W.rows();
  if (!gemv_for_few_rows && T > 0 && T < kSameKernelMinRows) {
    // sgemm takes other kernels for very few rows: run at least kSameKernelMinRows (zeros after
    // x's rows) and keep the first T rows of the product.
    std::vector<float> x_padded(size_t(kSameKernelMinRows * in), 0.0f), y_padded(size_t(kSameKernelMinRows * out));
    std::copy_n(x, T * in, x_padded.data());
    quant_linear(x_padded.data(), kSameKernelMinRows, W, bias, y_padded.data(), false);
    std::copy_n(y_padded.data(), T * out, y);
    return;
  }
  if (!W.stored()) {
    linear(x, T, in, W.fp32().ptr(), bias, out, y);
    return;
  }
  if (T <= 0) return;
  if (T <= kGemvMaxRows && gemv_for_few_rows) {  // a generation step: read each weight once, no fp32 scratch
    quant_gemv(x, T, W, bias, y);
    return;
  }
  const int64_t threads = omp_in_parallel() ? 1 : std::max(1, omp_get_max_threads());
  const QuantPanels panels = quant_panels(out, in, threads);
  const int64_t panel_rows = panels.rows, n_panels = panels.count;
  std::exception_ptr failure;  // an exception may not leave a parallel region: kept, rethrown after
#pragma omp parallel
  {
    std::vector<float> panel(size_t(panel_rows * in));  // this thread's fp32 rows
#pragma omp for schedule(static)
    for (int64_t p = 0; p < n_panels; ++p) try {
        const int64_t r0 = p * panel_rows, n = std::min(panel_rows, out - r0);
        W.dequantize_rows(r0, n, panel.data());
        // y[:, r0 .. r0 + n) = x · panelᵀ (sgemm on this thread: oneDNN runs sequentially inside a
        // parallel region).
        matmul(x, in, panel.data(), in, y + r0, out, T, n, in, /*trans_b=*/true);
        if (bias != nullptr)
          for (int64_t t = 0; t < T; ++t)
            for (int64_t o = r0; o < r0 + n; ++o) y[t * out + o] += bias[o];
      } catch (...) {
#pragma omp critical
        if (!failure) failure = std::current_exception();
      }
  }
  if (failure) std::rethrow_exception(failure);
}

}  // namespace headscope::ops
