#include "ops/elementwise.h"

namespace headscope::ops {

namespace {
// Split over threads only when there is enough work to pay for waking one.
constexpr int64_t kMinParallelElements = int64_t(1) << 15;
}  // namespace

void add_inplace(float* y, const float* x, int64_t n) {
#pragma omp parallel for simd schedule(static) if (n >= kMinParallelElements)
  for (int64_t i = 0; i < n; ++i) y[i] += x[i];
}

}  // namespace headscope::ops
