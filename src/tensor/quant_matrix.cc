#include "tensor/quant_matrix.h"

#include <algorithm>
#include <cstring>

#include "headscope/error.h"

namespace headscope {

QuantMatrix::QuantMatrix(Tensor w) : f32_(std::move(w)) {
  if (f32_.empty()) return;
  f32_.expect_shape({-1, -1}, "a linear layer's weight");
  rows_ = f32_.dim(0);
  cols_ = f32_.dim(1);
}

QuantMatrix QuantMatrix::stored(io::GgmlType type, int64_t rows, int64_t cols, const uint8_t* data,
                                std::shared_ptr<const void> owner) {
  if (!io::ggml_can_dequantize(type))
    throw Error(std::string("a ") + io::ggml_type_name(type) + " matrix cannot be multiplied (no dequantizer for it)");
  const int64_t block = io::ggml_block_size(type);
  if (rows <= 0 || cols <= 0 || cols % block != 0)
    throw Error("a stored " + std::string(io::ggml_type_name(type)) + " matrix of " + std::to_string(rows) + " × " +
                std::to_string(cols) + " values is not whole rows of " + std::to_string(block) + "-value blocks");
  QuantMatrix m;
  m.rows_ = rows;
  m.cols_ = cols;
  m.parts_.push_back({type, rows, data, size_t(cols / block) * io::ggml_type_size(type)});
  m.owner_ = std::move(owner);
  return m;
}

QuantMatrix QuantMatrix::concat_rows(const std::vector<const QuantMatrix*>& parts) {
  if (parts.empty()) return {};
  const int64_t cols = parts.front()->cols();
  bool all_stored = true;
  for (const QuantMatrix* p : parts) {
    if (p->cols() != cols)
      throw Error("concat_rows: matrices of " + std::to_string(cols) + " and " + std::to_string(p->cols()) +
                  " columns");
    all_stored = all_stored && p->stored();
  }
  QuantMatrix m;
  m.cols_ = cols;
  if (all_stored) {
    for (const QuantMatrix* p : parts) {
      m.parts_.insert(m.parts_.end(), p->parts_.begin(), p->parts_.end());
      m.rows_ += p->rows();
      if (!m.owner_) m.owner_ = p->owner_;
    }
    return m;
  }
  // fp32 parts (or a mix, which no real file has): one fp32 matrix.
  int64_t rows = 0;
  for (const QuantMatrix* p : parts) rows += p->rows();
  Tensor w({rows, cols}, Tensor::Uninitialized{});
  int64_t r = 0;
  for (const QuantMatrix* p : parts) {
    p->dequantize_rows(0, p->rows(), w.ptr() + r * cols);
    r += p->rows();
  }
  return QuantMatrix(std::move(w));
}

uint64_t QuantMatrix::bytes() const {
  if (!stored()) return uint64_t(f32_.numel()) * sizeof(float);
  uint64_t n = 0;
  for (const Part& p : parts_) n += uint64_t(p.rows) * p.row_bytes;
  return n;
}

std::string QuantMatrix::type_names() const {
  if (!stored()) return "F32";
  std::string s;
  for (const Part& p : parts_) {
    const std::string name = io::ggml_type_name(p.type);
    if (s.find(name) == std::string::npos) s += (s.empty() ? "" : "+") + name;
  }
  return s;
}

void QuantMatrix::dequantize_rows(int64_t r0, int64_t n, float* dst) const {
  if (r0 < 0 || n < 0 || r0 + n > rows_)
    throw Error("dequantize_rows: rows " + std::to_string(r0) + " .. " + std::to_string(r0 + n) + " of a " +
                std::to_string(rows_) + "-row matrix");
  if (!stored()) {
    std::memcpy(dst, f32_.ptr() + r0 * cols_, size_t(n * cols_) * sizeof(float));
    return;
  }
  int64_t first = 0;  // first row of the part
  for (const Part& p : parts_) {
    const int64_t lo = std::max(r0, first), hi = std::min(r0 + n, first + p.rows);
    if (lo < hi)
      io::dequantize_row(p.type, p.data + size_t(lo - first) * p.row_bytes, dst + (lo - r0) * cols_, (hi - lo) * cols_);
    first += p.rows;
  }
}

void QuantMatrix::dequantize_cols(int64_t c0, int64_t n, float* dst, int64_t ld) const {
  if (c0 < 0 || n < 0 || c0 + n > cols_ || ld < n)
    throw Error("dequantize_cols: columns " + std::to_string(c0) + " .. " + std::to_string(c0 + n) + " of a " +
                std::to_string(cols_) + "-column matrix into rows of " + std::to_string(ld));
  if (n == 0) return;
  if (!stored()) {
    for (int64_t r = 0; r < rows_; ++r)
      std::memcpy(dst + r * ld, f32_.ptr() + r * cols_ + c0, size_t(n) * sizeof(float));
    return;
  }
  std::vector<float> covering;  // one row's covering blocks, when they reach past the range
  int64_t first = 0;            // first row of the part
  for (const Part& p : parts_) {
    const int64_t block = io::ggml_block_size(p.type);
    const int64_t b0 = c0 / block * block, b1 = (c0 + n + block - 1) / block * block;  // [b0, b1) ⊇ [c0, c0 + n)
    const size_t offset = size_t(b0 / block) * io::ggml_type_size(p.type);
    const bool exact = b0 == c0 && b1 == c0 + n;
    if (!exact) covering.resize(size_t(b1 - b0));
    for (int64_t r = 0; r < p.rows; ++r) {
      const uint8_t* src = p.data + size_t(r) * p.row_bytes + offset;
      float* out = dst + (first + r) * ld;
      if (exact) {
        io::dequantize_row(p.type, src, out, n);
      } else {
        io::dequantize_row(p.type, src, covering.data(), b1 - b0);
        std::copy_n(covering.data() + (c0 - b0), n, out);
      }
    }
    first += p.rows;
  }
}

QuantMatrix::StoredRow QuantMatrix::stored_row(int64_t r) const {
  int64_t first = 0;  // first row of the part
  for (const Part& p : parts_) {
    if (r >= first && r < first + p.rows) return {p.type, p.data + size_t(r - first) * p.row_bytes};
    first += p.rows;
  }
  throw Error("stored_row: row " + std::to_string(r) + " of a " + std::to_string(rows_) + "-row " +
              (stored() ? "stored" : "fp32") + " matrix");
}

Tensor QuantMatrix::to_f32() const {
  if (!stored()) return f32_;
  Tensor w({rows_, cols_}, Tensor::Uninitialized{});
  dequantize_rows(0, rows_, w.ptr());
  return w;
}

QuantMatrix QuantMatrix::row_block(int64_t r0, int64_t n) const {
  if (r0 < 0 || n <= 0 || r0 + n > rows_)
    throw Error("row_block: rows " + std::to_string(r0) + " .. " + std::to_string(r0 + n) + " of a " +
                std::to_string(rows_) + "-row matrix");
  if (!stored()) {
    Tensor w({n, cols_}, Tensor::Uninitialized{});
    dequantize_rows(r0, n, w.ptr());
    return QuantMatrix(std::move(w));
  }
  QuantMatrix m;
  m.rows_ = n;
  m.cols_ = cols_;
  m.owner_ = owner_;
  int64_t first = 0;
  for (const Part& p : parts_) {
    const int64_t lo = std::max(r0, first), hi = std::min(r0 + n, first + p.rows);
    if (lo < hi) m.parts_.push_back({p.type, hi - lo, p.data + size_t(lo - first) * p.row_bytes, p.row_bytes});
    first += p.rows;
  }
  return m;
}

}  // namespace headscope
