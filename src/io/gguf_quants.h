// headscope — ggml tensor storage types and their dequantization to fp32.
//
// Block layouts after ggml's ggml-common.h (the `block_*` structs) and gguf-py's
// gguf/quants.py; the reference dequantizers are ggml-quants.c `dequantize_row_*`. A quantized
// row of n values is n / block_size blocks of type_size bytes; each block holds its own scale(s)
// (f16 = IEEE binary16, little-endian) and packed integers:
//
//   Q4_0  (32 values, 18 B)   f16 d; u8 qs[16]                          x = (q - 8) * d
//   Q4_1  (32 values, 20 B)   f16 d, m; u8 qs[16]                       x = q * d + m
//   Q5_0  (32 values, 22 B)   f16 d; u32 qh; u8 qs[16]                  x = (q - 16) * d
//   Q5_1  (32 values, 24 B)   f16 d, m; u32 qh; u8 qs[16]               x = q * d + m
//   Q8_0  (32 values, 34 B)   f16 d; i8 qs[32]                          x = q * d
//   Q2_K  (256 values, 84 B)  u8 scales[16]; u8 qs[64]; f16 d, dmin     x = d*sc * q - dmin*m
//   Q3_K  (256 values, 110 B) u8 hmask[32]; u8 qs[64]; u8 scales[12]; f16 d
//   Q4_K  (256 values, 144 B) f16 d, dmin; u8 scales[12]; u8 qs[128]     x = d*sc * q - dmin*m
//   Q5_K  (256 values, 176 B) f16 d, dmin; u8 scales[12]; u8 qh[32]; u8 qs[128]
//   Q6_K  (256 values, 210 B) u8 ql[128]; u8 qh[64]; i8 scales[16]; f16 d   x = d*sc * (q - 32)
//
// (the bit-level detail of each is written beside its kernel in gguf_quants.cc). The container
// that holds such tensors is parsed by gguf.h.
#pragma once
#include <cstddef>
#include <cstdint>
#include <cstring>

namespace headscope::io {

// ggml tensor storage types (ggml.h `enum ggml_type`; the gaps are retired types).
enum class GgmlType : uint32_t {
  F32 = 0,
  F16 = 1,
  Q4_0 = 2,
  Q4_1 = 3,
  Q5_0 = 6,
  Q5_1 = 7,
  Q8_0 = 8,
  Q8_1 = 9,
  Q2_K = 10,
  Q3_K = 11,
  Q4_K = 12,
  Q5_K = 13,
  Q6_K = 14,
  Q8_K = 15,
  IQ2_XXS = 16,
  IQ2_XS = 17,
  IQ3_XXS = 18,
  IQ1_S = 19,
  IQ4_NL = 20,
  IQ3_S = 21,
  IQ2_S = 22,
  IQ4_XS = 23,
  I8 = 24,
  I16 = 25,
  I32 = 26,
  I64 = 27,
  F64 = 28,
  IQ1_M = 29,
  BF16 = 30,
  TQ1_0 = 34,
  TQ2_0 = 35,
  MXFP4 = 39,
  NVFP4 = 40,
  Q1_0 = 41,
};

// One row of the type table: sizes from ggml-common.h / gguf-py GGML_QUANT_SIZES.
struct GgmlTypeTraits {
  GgmlType type;
  const char* name;
  int64_t block_size;  // values per block
  size_t type_size;    // bytes per block
  bool dequantize;     // supported by dequantize_row
};
// The table row of a raw type number as stored in a file; nullptr if ggml has no such type.
const GgmlTypeTraits* find_ggml_type(uint32_t raw);

const char* ggml_type_name(GgmlType);  // "Q4_K", ...
int64_t ggml_block_size(GgmlType);     // values per block (1 for plain types, 32 or 256 for quants)
size_t ggml_type_size(GgmlType);       // bytes per block
bool ggml_can_dequantize(GgmlType);    // F32 F16 BF16 F64 Q4_0 Q4_1 Q5_0 Q5_1 Q8_0 Q2_K..Q6_K

// Dequantizes n consecutive values of `type` starting at a block boundary (n a multiple of the
// block size) into dst[0, n). Bit-exact with ggml's reference dequantize_row_* and gguf-py.
// Throws Error for types ggml_can_dequantize() rejects.
void dequantize_row(GgmlType type, const uint8_t* src, float* dst, int64_t n);

// Reads a T stored little-endian at an address of any alignment (the host is little-endian).
template <class T>
T load_unaligned(const uint8_t* p) {
  T v;
  std::memcpy(&v, p, sizeof v);
  return v;
}

}  // namespace headscope::io
