// Random ggml blocks for the tests of code that reads weights kept as a GGUF stores them.
#pragma once
#include <cmath>
#include <cstdint>
#include <random>
#include <vector>

#include "io/gguf_quants.h"

namespace headscope::testing {

// rows × cols values of `type` as random bytes, block by block; a block whose f16 scales make any
// value non-finite or larger than 100 is drawn again (random exponents), so every block is valid.
inline std::vector<uint8_t> random_blocks(io::GgmlType type, int64_t rows, int64_t cols, unsigned seed) {
  const int64_t block = io::ggml_block_size(type), n_blocks = rows * cols / block;
  const size_t size = io::ggml_type_size(type);
  std::vector<uint8_t> bytes(size_t(n_blocks) * size);
  std::mt19937 rng(seed);
  std::vector<float> values(static_cast<size_t>(block));
  for (int64_t b = 0; b < n_blocks; ++b) {
    uint8_t* p = bytes.data() + size_t(b) * size;
    for (bool ok = false; !ok;) {
      for (size_t i = 0; i < size; ++i) p[i] = uint8_t(rng());
      io::dequantize_row(type, p, values.data(), block);
      ok = true;
      for (float v : values) ok = ok && std::isfinite(v) && std::fabs(v) <= 100.0f;
    }
  }
  return bytes;
}

}  // namespace headscope::testing
