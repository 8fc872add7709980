#include "tensor/tensor_ops.h"

#include <algorithm>
#include <cstring>

namespace headscope {

Tensor concat_rows(const std::vector<const Tensor*>& parts) {
  if (parts.empty()) throw Error("concat_rows: no parts");
  std::vector<int64_t> shape = parts.front()->shape;
  if (shape.empty()) throw Error("concat_rows: a scalar has no rows");
  shape[0] = 0;
  for (const Tensor* p : parts) {
    if (p->rank() != int(shape.size()) || !std::equal(shape.begin() + 1, shape.end(), p->shape.begin() + 1))
      throw Error("concat_rows: cannot stack " + p->shape_str() + " under " + parts.front()->shape_str() +
                  " (the trailing shapes differ)");
    shape[0] += p->shape[0];
  }
  Tensor out(shape, Tensor::Uninitialized{});  // every element is copied below
  float* dst = out.ptr();
  for (const Tensor* p : parts) dst = std::copy(p->data.begin(), p->data.end(), dst);
  return out;
}

Tensor transpose(const Tensor& t) {
  t.expect_shape({-1, -1}, "transpose");
  const int64_t R = t.dim(0), C = t.dim(1);
  Tensor out({C, R}, Tensor::Uninitialized{});
  for (int64_t r = 0; r < R; ++r)
    for (int64_t c = 0; c < C; ++c) out.data[size_t(c * R + r)] = t.data[size_t(r * C + c)];
  return out;
}

void copy_rows(float* dst, int64_t dst_stride, const float* src, int64_t src_stride, int64_t rows, int64_t cols) {
  for (int64_t r = 0; r < rows; ++r)
    std::memcpy(dst + r * dst_stride, src + r * src_stride, sizeof(float) * size_t(cols));
}

}  // namespace headscope
