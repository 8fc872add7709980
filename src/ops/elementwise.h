// headscope — elementwise arithmetic on whole buffers.
#pragma once
#include <cstdint>

namespace headscope::ops {

// y += x, elementwise (residual connection).
void add_inplace(float* y, const float* x, int64_t n);

}  // namespace headscope::ops
