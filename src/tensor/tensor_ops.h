// headscope — row and layout helpers on Tensor and on row-major fp32 buffers, shared by every
// model family (load-time fusing and transposes) and by the capture (copying head slices out of
// a fused projection).
#pragma once
#include <cstdint>
#include <vector>

#include "headscope/tensor.h"

namespace headscope {

// Stacks row blocks, e.g. W_q, W_k, W_v into W_qkv: [Σ rows_i, trailing...]. Every part has the
// same trailing shape (Error otherwise).
Tensor concat_rows(const std::vector<const Tensor*>& parts);

// [rows, cols] -> [cols, rows] (GPT-2's Conv1D stores weights as (in, out), nn.Linear as (out, in)).
Tensor transpose(const Tensor& t);

// Copies a [rows, cols] block between strided row-major buffers: dst row r (at dst + r·dst_stride)
// receives src row r (at src + r·src_stride). Strides are in floats and at least `cols`.
void copy_rows(float* dst, int64_t dst_stride, const float* src, int64_t src_stride, int64_t rows, int64_t cols);

}  // namespace headscope
