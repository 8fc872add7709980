// headscope — the weight matrix of a linear layer (or an embedding), as fp32 or as the model file
// stores it.
//
// W [rows = out features, cols = in features]: either an fp32 Tensor (safetensors, and anything
// converted at load) or one or more row ranges of GGUF data left in the memory-mapped file (no
// copy), each with its own ggml type (a fused Q | K | V can join a Q4_K Q with a Q6_K V). Each row
// of a stored matrix is whole blocks (GgufFile checks that ne[0] is a multiple of the block size),
// so any range of rows can be dequantised on its own with io::dequantize_row; ops::quant_linear
// multiplies by it panel by panel. A range of columns (one attention head's slice of W_O) is read
// from the blocks that cover it (dequantize_cols).
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "headscope/tensor.h"
#include "io/gguf_quants.h"

namespace headscope {

class QuantMatrix {
 public:
  QuantMatrix() = default;
  QuantMatrix(Tensor w);  // NOLINT: implicit, an fp32 [rows, cols] matrix is a QuantMatrix
  // `rows` rows of `cols` values of `type` at `data` (rows · cols / block_size blocks), which
  // `owner` keeps alive (the mapped file). Throws Error for a type dequantize_row lacks.
  static QuantMatrix stored(io::GgmlType type, int64_t rows, int64_t cols, const uint8_t* data,
                            std::shared_ptr<const void> owner);
  // Rows Q | K | V (or any list) as one matrix; all must have the same cols. fp32 parts give an
  // fp32 concatenation; stored parts stay in the file (an fp32 part among stored ones is copied).
  static QuantMatrix concat_rows(const std::vector<const QuantMatrix*>& parts);
  // Whether a reader keeps a tensor of this type as stored: F16, BF16 and the quantized types
  // dequantize_row knows (F32 and F64 are read as fp32, no larger than the file).
  static bool keeps_stored(io::GgmlType type) {
    return io::ggml_can_dequantize(type) && type != io::GgmlType::F32 && type != io::GgmlType::F64;
  }

  int64_t rows() const { return rows_; }
  int64_t cols() const { return cols_; }
  bool empty() const { return rows_ == 0; }
  bool stored() const { return !parts_.empty(); }  // false: fp32()
  const Tensor& fp32() const { return f32_; }      // [rows, cols] when !stored()
  std::vector<int64_t> shape() const { return {rows_, cols_}; }
  // Resident bytes: the fp32 values, or the stored blocks (mapped from the file).
  uint64_t bytes() const;
  std::string type_names() const;  // "F32", "Q4_K", "Q4_K+Q6_K" (messages, docs)

  // Row r's blocks as stored (type and first byte), for kernels that read blocks themselves
  // (ops/quant_gemv.cc). Requires stored() and 0 ≤ r < rows().
  struct StoredRow {
    io::GgmlType type;
    const uint8_t* data;
  };
  StoredRow stored_row(int64_t r) const;

  // dst[n, cols] = rows r0 .. r0 + n − 1 as fp32.
  void dequantize_rows(int64_t r0, int64_t n, float* dst) const;
  // dst[rows, n] (row stride ld ≥ n) = columns c0 .. c0 + n − 1 as fp32. Each row's blocks that
  // cover the range are dequantised whole (a K-quant block is 256 values, wider than a head's 64
  // or 128 columns) and the range copied out of them; an fp32 matrix is copied.
  void dequantize_cols(int64_t c0, int64_t n, float* dst, int64_t ld) const;
  Tensor to_f32() const;                               // the whole matrix [rows, cols]
  QuantMatrix row_block(int64_t r0, int64_t n) const;  // rows r0 .. r0 + n − 1 (no copy when stored)

 private:
  struct Part {
    io::GgmlType type;
    int64_t rows;
    const uint8_t* data;
    size_t row_bytes;
  };
  Tensor f32_;
  std::vector<Part> parts_;
  int64_t rows_ = 0, cols_ = 0;
  std::shared_ptr<const void> owner_;
};

}  // namespace headscope
