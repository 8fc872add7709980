#include "ops/quant_gemv.h"

#include <exception>
#include <string>
#include <vector>

#include "cpu/isa.h"
#include "headscope/error.h"
#include "ops/gemv_kernels.h"

namespace headscope::ops {

namespace {

// The portable path: a dequantised row times each row of x, the sum in order (T is a
// compile-time count so that the sums stay in registers).
template <int T>
void float_dot_portable(const float* w, int64_t n, const float* x, float* sums) {
  float sum[T] = {};
  for (int64_t k = 0; k < n; ++k)
    for (int t = 0; t < T; ++t) sum[t] += w[k] * x[t * n + k];
  for (int t = 0; t < T; ++t) sums[t] = sum[t];
}

void float_dot_portable(const float* w, int64_t n, const float* x, int T, float* sums) {
  switch (T) {
    case 1:
      return float_dot_portable<1>(w, n, x, sums);
    case 2:
      return float_dot_portable<2>(w, n, x, sums);
    case 3:
      return float_dot_portable<3>(w, n, x, sums);
    default:
      return float_dot_portable<4>(w, n, x, sums);
  }
}

// The kernels of a path: built once; a type the path has no block kernel for takes the next
// lower path's (AVX-512 → AVX2), else the dequantise-then-dot route.
const kernels::GemvKernels& kernels_for(cpu::Isa isa) {
  static const kernels::GemvKernels portable = [] {
    kernels::GemvKernels k;
    k.f32 = float_dot_portable;
    return k;
  }();
#if defined(__x86_64__)
  static const kernels::GemvKernels avx2 = kernels::gemv_kernels_avx2();
  static const kernels::GemvKernels avx512 = [] {
    kernels::GemvKernels k = kernels::gemv_kernels_avx512();
    for (auto entry : {&kernels::GemvKernels::q4_0, &kernels::GemvKernels::q4_1, &kernels::GemvKernels::q5_0,
                       &kernels::GemvKernels::q8_0, &kernels::GemvKernels::q4_k, &kernels::GemvKernels::q6_k})
      if (k.*entry == nullptr) k.*entry = avx2.*entry;
    return k;
  }();
  if (isa == cpu::Isa::avx512) return avx512;
  if (isa == cpu::Isa::avx2) return avx2;
#endif
  return portable;
}

kernels::BlockRowDot block_kernel(const kernels::GemvKernels& k, io::GgmlType type) {
  switch (type) {
    case io::GgmlType::Q4_0:
      return k.q4_0;
    case io::GgmlType::Q4_1:
      return k.q4_1;
    case io::GgmlType::Q5_0:
      return k.q5_0;
    case io::GgmlType::Q8_0:
      return k.q8_0;
    case io::GgmlType::Q4_K:
      return k.q4_k;
    case io::GgmlType::Q6_K:
      return k.q6_k;
    default:
      return nullptr;
  }
}

void gemv_rows(const float* x, int T, const QuantMatrix& W, const float* bias, float* y) {
  const int64_t in = W.cols(), out = W.rows();
  const bool parallel = out * in >= kGemvMinParallelWeights;
  const kernels::GemvKernels& kernels = kernels_for(cpu::active_isa());
  std::exception_ptr failure;  // an exception may not leave a parallel region: kept, rethrown after
#pragma omp parallel if (parallel)
  {
    std::vector<float> row;  // one dequantised row of W (types without a block kernel)
    float sums[kGemvMaxRows];
#pragma omp for schedule(static)
    for (int64_t o = 0; o < out; ++o) try {
        const QuantMatrix::StoredRow r = W.stored_row(o);
        if (const kernels::BlockRowDot kernel = block_kernel(kernels, r.type)) {
          kernel(r.data, in, x, T, sums);
        } else {
          row.resize(static_cast<size_t>(in));
          W.dequantize_rows(o, 1, row.data());
          kernels.f32(row.data(), in, x, T, sums);
        }
        for (int t = 0; t < T; ++t) y[t * out + o] = sums[t];
        if (bias != nullptr)
          for (int t = 0; t < T; ++t) y[t * out + o] += bias[o];
      } catch (...) {
#pragma omp critical
        if (!failure) failure = std::current_exception();
      }
  }
  if (failure) std::rethrow_exception(failure);
}

}  // namespace

void quant_gemv(const float* x, int64_t T, const QuantMatrix& W, const float* bias, float* y) {
  if (!W.stored()) throw Error("quant_gemv: an fp32 matrix (call ops::linear)");
  if (T < 1 || T > kGemvMaxRows)
    throw Error("quant_gemv: " + std::to_string(T) + " rows of x (at most " + std::to_string(kGemvMaxRows) + ")");
  gemv_rows(x, int(T), W, bias, y);
}

}  // namespace headscope::ops
