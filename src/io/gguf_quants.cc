// Dequantization of the ggml block formats to fp32 (layouts in gguf_quants.h, after
// ggml-common.h). Each kernel turns `nb` blocks at x into values at y and states its block in a
// comment; dequantize_row dispatches on the type and on cpu::active_isa(). The scalar loops here
// are the portable path and the slow twin of the AVX2 and AVX-512 kernels (gguf_quants_avx2.cc,
// gguf_quants_avx512.cc; dequant_kernels.h), which write the same floats bit for bit.
#include "io/gguf_quants.h"

#include <bit>
#include <string>

#include "cpu/isa.h"
#include "headscope/error.h"
#include "io/dequant_kernels.h"
#include "io/float_bits.h"

// Rounding. Every value is an integer q times a scale that is an f16 (11 significant bits) or an
// f16 times a small integer, minus or plus at most one more such product: gguf-py computes it in
// numpy float32 as `d * q + m`, a rounded product then a rounded sum. Here the products are exact
// in fp32 — the odd parts of the factors multiply to at most 2047 · 127 · 31 < 2²⁴ (Q6_K's
// d · scale · q, the widest), and an f16 times such integers can neither overflow nor leave
// fp32's normal range — so the product's rounding is a no-op and only the sum rounds, once. The
// result is therefore the same whether or not the compiler fuses `d * q + m` into an FMA (GCC
// does by default on FMA targets, in these loops and in the vector kernels' mul-then-add alike),
// and equal to gguf-py's and ggml's reference dequantizers. gguf_quants_test checks the exactness
// over every f16 significand.

namespace headscope::io {

static_assert(std::endian::native == std::endian::little, "ggml blocks are stored little-endian");

namespace {

// ---------------------------------------------------------------------------------------------
// Type table

constexpr int64_t QK = 32;     // block size of the classic formats (ggml QK4_0, QK8_0, ...)
constexpr int64_t QK_K = 256;  // super-block size of the K-quants

// Sizes from ggml-common.h / gguf-py GGML_QUANT_SIZES. Types we cannot dequantize are still
// listed so a file containing them opens and can be inspected.
constexpr GgmlTypeTraits kGgmlTypes[] = {
    {GgmlType::F32, "F32", 1, 4, true},
    {GgmlType::F16, "F16", 1, 2, true},
    {GgmlType::Q4_0, "Q4_0", QK, 2 + QK / 2, true},
    {GgmlType::Q4_1, "Q4_1", QK, 2 + 2 + QK / 2, true},
    {GgmlType::Q5_0, "Q5_0", QK, 2 + 4 + QK / 2, true},
    {GgmlType::Q5_1, "Q5_1", QK, 2 + 2 + 4 + QK / 2, true},
    {GgmlType::Q8_0, "Q8_0", QK, 2 + QK, true},
    {GgmlType::Q8_1, "Q8_1", QK, 4 + 4 + QK, false},
    {GgmlType::Q2_K, "Q2_K", QK_K, QK_K / 16 + QK_K / 4 + 2 + 2, true},
    {GgmlType::Q3_K, "Q3_K", QK_K, QK_K / 8 + QK_K / 4 + 12 + 2, true},
    {GgmlType::Q4_K, "Q4_K", QK_K, 2 + 2 + 12 + QK_K / 2, true},
    {GgmlType::Q5_K, "Q5_K", QK_K, 2 + 2 + 12 + QK_K / 8 + QK_K / 2, true},
    {GgmlType::Q6_K, "Q6_K", QK_K, QK_K / 2 + QK_K / 4 + QK_K / 16 + 2, true},
    {GgmlType::Q8_K, "Q8_K", QK_K, 4 + QK_K + QK_K / 8, false},
    {GgmlType::IQ2_XXS, "IQ2_XXS", QK_K, 2 + QK_K / 4, false},
    {GgmlType::IQ2_XS, "IQ2_XS", QK_K, 2 + QK_K / 4 + QK_K / 32, false},
    {GgmlType::IQ3_XXS, "IQ3_XXS", QK_K, 2 + QK_K / 4 + QK_K / 8, false},
    {GgmlType::IQ1_S, "IQ1_S", QK_K, 2 + QK_K / 8 + QK_K / 16, false},
    {GgmlType::IQ4_NL, "IQ4_NL", QK, 2 + QK / 2, false},
    {GgmlType::IQ3_S, "IQ3_S", QK_K, 2 + QK_K / 4 + QK_K / 8 + QK_K / 32 + 4, false},
    {GgmlType::IQ2_S, "IQ2_S", QK_K, 2 + QK_K / 4 + QK_K / 16, false},
    {GgmlType::IQ4_XS, "IQ4_XS", QK_K, 2 + 2 + QK_K / 2 + QK_K / 64, false},
    {GgmlType::I8, "I8", 1, 1, false},
    {GgmlType::I16, "I16", 1, 2, false},
    {GgmlType::I32, "I32", 1, 4, false},
    {GgmlType::I64, "I64", 1, 8, false},
    {GgmlType::F64, "F64", 1, 8, true},
    {GgmlType::IQ1_M, "IQ1_M", QK_K, QK_K / 8 + QK_K / 16 + QK_K / 32, false},
    {GgmlType::BF16, "BF16", 1, 2, true},
    {GgmlType::TQ1_0, "TQ1_0", QK_K, 2 + 4 * 13, false},
    {GgmlType::TQ2_0, "TQ2_0", QK_K, 2 + 64, false},
    {GgmlType::MXFP4, "MXFP4", QK, 1 + QK / 2, false},
    {GgmlType::NVFP4, "NVFP4", 64, 4 + 32, false},
    {GgmlType::Q1_0, "Q1_0", 128, 2 + 16, false},
};

const GgmlTypeTraits& traits(GgmlType type) {
  const GgmlTypeTraits* t = find_ggml_type(static_cast<uint32_t>(type));
  if (t == nullptr) throw Error("unknown ggml type " + std::to_string(static_cast<uint32_t>(type)));
  return *t;
}

// ---------------------------------------------------------------------------------------------
// Dequantization kernels: `nb` blocks from x into y. Names and layouts follow ggml-common.h.

// block_q4_0 (18 B): f16 d; u8 qs[16]. Value j = (lo nibble of qs[j] - 8) * d, value j+16 uses
// the high nibble.
void dequant_q4_0(const uint8_t* x, float* y, int64_t nb) {
  for (int64_t b = 0; b < nb; ++b, x += 18, y += QK) {
    const float d = load_f16(x);
    const uint8_t* qs = x + 2;
    for (int j = 0; j < QK / 2; ++j) {
      y[j] = static_cast<float>((qs[j] & 0x0F) - 8) * d;
      y[j + QK / 2] = static_cast<float>((qs[j] >> 4) - 8) * d;
    }
  }
}

// block_q4_1 (20 B): f16 d; f16 m; u8 qs[16]. Value = nibble * d + m (nibbles as in Q4_0).
void dequant_q4_1(const uint8_t* x, float* y, int64_t nb) {
  for (int64_t b = 0; b < nb; ++b, x += 20, y += QK) {
    const float d = load_f16(x), m = load_f16(x + 2);
    const uint8_t* qs = x + 4;
    for (int j = 0; j < QK / 2; ++j) {
      y[j] = static_cast<float>(qs[j] & 0x0F) * d + m;
      y[j + QK / 2] = static_cast<float>(qs[j] >> 4) * d + m;
    }
  }
}

// block_q5_0 (22 B): f16 d; u32 qh (bit j = 5th bit of value j); u8 qs[16] (low 4 bits as in
// Q4_0). Value = (5-bit q - 16) * d.
void dequant_q5_0(const uint8_t* x, float* y, int64_t nb) {
  for (int64_t b = 0; b < nb; ++b, x += 22, y += QK) {
    const float d = load_f16(x);
    const uint32_t qh = load_unaligned<uint32_t>(x + 2);
    const uint8_t* qs = x + 6;
    for (int j = 0; j < QK / 2; ++j) {
      const int hi0 = static_cast<int>((qh >> j) & 1u) << 4;
      const int hi1 = static_cast<int>((qh >> (j + QK / 2)) & 1u) << 4;
      y[j] = static_cast<float>(((qs[j] & 0x0F) | hi0) - 16) * d;
      y[j + QK / 2] = static_cast<float>(((qs[j] >> 4) | hi1) - 16) * d;
    }
  }
}

// block_q5_1 (24 B): f16 d; f16 m; u32 qh; u8 qs[16]. Value = 5-bit q * d + m.
void dequant_q5_1(const uint8_t* x, float* y, int64_t nb) {
  for (int64_t b = 0; b < nb; ++b, x += 24, y += QK) {
    const float d = load_f16(x), m = load_f16(x + 2);
    const uint32_t qh = load_unaligned<uint32_t>(x + 4);
    const uint8_t* qs = x + 8;
    for (int j = 0; j < QK / 2; ++j) {
      const int hi0 = static_cast<int>((qh >> j) & 1u) << 4;
      const int hi1 = static_cast<int>((qh >> (j + QK / 2)) & 1u) << 4;
      y[j] = static_cast<float>((qs[j] & 0x0F) | hi0) * d + m;
      y[j + QK / 2] = static_cast<float>((qs[j] >> 4) | hi1) * d + m;
    }
  }
}

// block_q8_0 (34 B): f16 d; i8 qs[32]. Value = qs * d.
void dequant_q8_0(const uint8_t* x, float* y, int64_t nb) {
  for (int64_t b = 0; b < nb; ++b, x += 34, y += QK) {
    const float d = load_f16(x);
    const int8_t* qs = reinterpret_cast<const int8_t*>(x + 2);
    for (int j = 0; j < QK; ++j) y[j] = static_cast<float>(qs[j]) * d;
  }
}

// block_q2_K (84 B): u8 scales[16] (lo nibble scale, hi nibble min, one per 16 values);
// u8 qs[64] (2-bit values); f16 d; f16 dmin. Each 128-value half reads 32 bytes of qs four
// times at bit shifts 0, 2, 4, 6; each pass covers 32 values = two 16-value sub-blocks.
void dequant_q2_k(const uint8_t* x, float* y, int64_t nb) {
  for (int64_t b = 0; b < nb; ++b, x += 84, y += QK_K) {
    const uint8_t* scales = x;
    const uint8_t* qs = x + 16;
    const float d = load_f16(x + 80), dmin = load_f16(x + 82);
    for (int half = 0; half < 2; ++half) {
      const uint8_t* q = qs + 32 * half;
      for (int pass = 0; pass < 4; ++pass) {
        const int shift = 2 * pass;
        for (int sub = 0; sub < 2; ++sub) {
          const uint8_t sc = scales[half * 8 + pass * 2 + sub];
          const float dl = d * static_cast<float>(sc & 0x0F);
          const float ml = dmin * static_cast<float>(sc >> 4);
          float* out = y + half * 128 + pass * 32 + sub * 16;
          for (int l = 0; l < 16; ++l) out[l] = dl * static_cast<float>((q[sub * 16 + l] >> shift) & 3) - ml;
        }
      }
    }
  }
}

// block_q3_K (110 B): u8 hmask[32] (3rd bit of each value); u8 qs[64] (low 2 bits, walked as in
// Q2_K); u8 scales[12] (16 signed 6-bit scales, biased by 32); f16 d. Value =
// d * (scale - 32) * (low2 - (hmask bit set ? 0 : 4)).
void dequant_q3_k(const uint8_t* x, float* y, int64_t nb) {
  for (int64_t b = 0; b < nb; ++b, x += 110, y += QK_K) {
    const uint8_t* hmask = x;
    const uint8_t* qs = x + 32;
    const uint8_t* packed = x + 96;
    const float d = load_f16(x + 108);
    // Scale i: low 4 bits from byte i (i < 8, low nibble) or byte i-8 (high nibble); high 2 bits
    // from byte 8 + i%4 at bit 2*(i/4).
    int scale[16];
    for (int i = 0; i < 16; ++i) {
      const int lo = i < 8 ? (packed[i] & 0x0F) : (packed[i - 8] >> 4);
      const int hi = (packed[8 + i % 4] >> (2 * (i / 4))) & 3;
      scale[i] = (lo | (hi << 4)) - 32;
    }
    for (int half = 0; half < 2; ++half) {
      const uint8_t* q = qs + 32 * half;
      for (int pass = 0; pass < 4; ++pass) {
        const int shift = 2 * pass;
        const uint8_t mask = static_cast<uint8_t>(1u << (half * 4 + pass));
        for (int sub = 0; sub < 2; ++sub) {
          const float dl = d * static_cast<float>(scale[half * 8 + pass * 2 + sub]);
          float* out = y + half * 128 + pass * 32 + sub * 16;
          for (int l = 0; l < 16; ++l) {
            const int idx = sub * 16 + l;
            const int v = ((q[idx] >> shift) & 3) - ((hmask[idx] & mask) ? 0 : 4);
            out[l] = dl * static_cast<float>(v);
          }
        }
      }
    }
  }
}

// The 12-byte scale/min table of Q4_K and Q5_K: eight 6-bit scales and eight 6-bit mins
// (ggml get_scale_min_k4). Entries 0-3 sit in the low 6 bits of bytes 0-3 (scales) and 4-7
// (mins); entries 4-7 take 4 bits from bytes 8-11 and their top 2 bits from the spare high
// bits of bytes 0-7.
void unpack_scale_min_k4(const uint8_t* q, int sc[8], int mn[8]) {
  for (int j = 0; j < 4; ++j) {
    sc[j] = q[j] & 63;
    mn[j] = q[j + 4] & 63;
  }
  for (int j = 4; j < 8; ++j) {
    sc[j] = (q[j + 4] & 0x0F) | ((q[j - 4] >> 6) << 4);
    mn[j] = (q[j + 4] >> 4) | ((q[j] >> 6) << 4);
  }
}

// block_q4_K (144 B): f16 d; f16 dmin; u8 scales[12]; u8 qs[128]. Eight 32-value sub-blocks;
// each 64-value chunk reads 32 bytes of qs: low nibbles are sub-block 2c, high nibbles 2c+1.
// Value = d*scale * q - dmin*min.
void dequant_q4_k(const uint8_t* x, float* y, int64_t nb) {
  for (int64_t b = 0; b < nb; ++b, x += 144, y += QK_K) {
    const float d = load_f16(x), dmin = load_f16(x + 2);
    int sc[8], mn[8];
    unpack_scale_min_k4(x + 4, sc, mn);
    const uint8_t* qs = x + 16;
    for (int c = 0; c < 4; ++c) {
      const float d1 = d * static_cast<float>(sc[2 * c]), m1 = dmin * static_cast<float>(mn[2 * c]);
      const float d2 = d * static_cast<float>(sc[2 * c + 1]), m2 = dmin * static_cast<float>(mn[2 * c + 1]);
      const uint8_t* q = qs + 32 * c;
      for (int l = 0; l < 32; ++l) {
        y[64 * c + l] = d1 * static_cast<float>(q[l] & 0x0F) - m1;
        y[64 * c + 32 + l] = d2 * static_cast<float>(q[l] >> 4) - m2;
      }
    }
  }
}

// block_q5_K (176 B): f16 d; f16 dmin; u8 scales[12]; u8 qh[32]; u8 qs[128]. As Q4_K, plus a
// 5th bit: bit 2c of qh[l] for the low-nibble sub-block of chunk c, bit 2c+1 for the high one.
void dequant_q5_k(const uint8_t* x, float* y, int64_t nb) {
  for (int64_t b = 0; b < nb; ++b, x += 176, y += QK_K) {
    const float d = load_f16(x), dmin = load_f16(x + 2);
    int sc[8], mn[8];
    unpack_scale_min_k4(x + 4, sc, mn);
    const uint8_t* qh = x + 16;
    const uint8_t* qs = x + 48;
    for (int c = 0; c < 4; ++c) {
      const float d1 = d * static_cast<float>(sc[2 * c]), m1 = dmin * static_cast<float>(mn[2 * c]);
      const float d2 = d * static_cast<float>(sc[2 * c + 1]), m2 = dmin * static_cast<float>(mn[2 * c + 1]);
      const uint8_t* q = qs + 32 * c;
      for (int l = 0; l < 32; ++l) {
        const int lo = (q[l] & 0x0F) | (((qh[l] >> (2 * c)) & 1) << 4);
        const int hi = (q[l] >> 4) | (((qh[l] >> (2 * c + 1)) & 1) << 4);
        y[64 * c + l] = d1 * static_cast<float>(lo) - m1;
        y[64 * c + 32 + l] = d2 * static_cast<float>(hi) - m2;
      }
    }
  }
}

// block_q6_K (210 B): u8 ql[128] (low 4 bits); u8 qh[64] (high 2 bits); i8 scales[16] (one per
// 16 values); f16 d. Per 128-value half: ql[0..63] and qh[0..31] of that half; value
// l + 32k (k = 0..3) takes nibble (k/2 ? high : low) of ql[l + 32*(k%2)] and bits 2k..2k+1 of
// qh[l]. Value = d * scale * (6-bit q - 32).
void dequant_q6_k(const uint8_t* x, float* y, int64_t nb) {
  for (int64_t b = 0; b < nb; ++b, x += 210, y += QK_K) {
    const float d = load_f16(x + 208);
    const int8_t* scales = reinterpret_cast<const int8_t*>(x + 192);
    for (int half = 0; half < 2; ++half) {
      const uint8_t* ql = x + 64 * half;
      const uint8_t* qh = x + 128 + 32 * half;
      const int8_t* sc = scales + 8 * half;
      float* out = y + 128 * half;
      for (int l = 0; l < 32; ++l) {
        const int is = l / 16;
        const int q1 = ((ql[l] & 0x0F) | (((qh[l] >> 0) & 3) << 4)) - 32;
        const int q2 = ((ql[l + 32] & 0x0F) | (((qh[l] >> 2) & 3) << 4)) - 32;
        const int q3 = ((ql[l] >> 4) | (((qh[l] >> 4) & 3) << 4)) - 32;
        const int q4 = ((ql[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4)) - 32;
        out[l] = d * static_cast<float>(sc[is]) * static_cast<float>(q1);
        out[l + 32] = d * static_cast<float>(sc[is + 2]) * static_cast<float>(q2);
        out[l + 64] = d * static_cast<float>(sc[is + 4]) * static_cast<float>(q3);
        out[l + 96] = d * static_cast<float>(sc[is + 6]) * static_cast<float>(q4);
      }
    }
  }
}

}  // namespace

// ---------------------------------------------------------------------------------------------
// Public type helpers

const GgmlTypeTraits* find_ggml_type(uint32_t raw) {
  for (const auto& t : kGgmlTypes)
    if (static_cast<uint32_t>(t.type) == raw) return &t;
  return nullptr;
}

const char* ggml_type_name(GgmlType t) {
  const GgmlTypeTraits* tr = find_ggml_type(static_cast<uint32_t>(t));
  return tr ? tr->name : "unknown";
}
int64_t ggml_block_size(GgmlType t) { return traits(t).block_size; }
size_t ggml_type_size(GgmlType t) { return traits(t).type_size; }
bool ggml_can_dequantize(GgmlType t) {
  const GgmlTypeTraits* tr = find_ggml_type(static_cast<uint32_t>(t));
  return tr != nullptr && tr->dequantize;
}

namespace {

// The block kernel of the active path (null: the scalar loop below).
kernels::BlockDequant vector_kernel(GgmlType type) {
#if defined(__x86_64__)
  static const kernels::DequantKernels avx2 = kernels::dequant_kernels_avx2();
  static const kernels::DequantKernels avx512 = kernels::dequant_kernels_avx512();
  const cpu::Isa isa = cpu::active_isa();
  if (isa == cpu::Isa::portable) return nullptr;
  const kernels::DequantKernels& k = isa == cpu::Isa::avx512 ? avx512 : avx2;
  switch (type) {
    case GgmlType::Q4_0:
      return k.q4_0;
    case GgmlType::Q4_1:
      return k.q4_1;
    case GgmlType::Q5_0:
      return k.q5_0;
    case GgmlType::Q5_1:
      return k.q5_1;
    case GgmlType::Q8_0:
      return k.q8_0;
    case GgmlType::Q2_K:
      return k.q2_k;
    case GgmlType::Q3_K:
      return k.q3_k;
    case GgmlType::Q4_K:
      return k.q4_k;
    case GgmlType::Q5_K:
      return k.q5_k;
    case GgmlType::Q6_K:
      return k.q6_k;
    default:
      return nullptr;
  }
#else
  return nullptr;
#endif
}

}  // namespace

void dequantize_row(GgmlType type, const uint8_t* src, float* dst, int64_t n) {
  const GgmlTypeTraits& tr = traits(type);
  if (!tr.dequantize) throw Error(std::string("dequantizing ggml type ") + tr.name + " is not supported");
  if (n < 0 || n % tr.block_size != 0)
    throw Error(std::string("dequantize_row: ") + std::to_string(n) + " values is not a whole number of " + tr.name +
                " blocks of " + std::to_string(tr.block_size));
  const int64_t nb = n / tr.block_size;
  if (const kernels::BlockDequant kernel = vector_kernel(type)) {
    kernel(src, dst, nb);
    return;
  }
  switch (type) {
    case GgmlType::F32:
      if (n > 0) std::memcpy(dst, src, static_cast<size_t>(n) * 4);
      break;
    case GgmlType::F16:
      f16_to_f32_row(src, dst, static_cast<size_t>(n));
      break;
    case GgmlType::BF16:
      bf16_to_f32_row(src, dst, static_cast<size_t>(n));
      break;
    case GgmlType::F64:
      for (int64_t i = 0; i < n; ++i) dst[i] = static_cast<float>(load_unaligned<double>(src + 8 * i));
      break;
    case GgmlType::Q4_0:
      dequant_q4_0(src, dst, nb);
      break;
    case GgmlType::Q4_1:
      dequant_q4_1(src, dst, nb);
      break;
    case GgmlType::Q5_0:
      dequant_q5_0(src, dst, nb);
      break;
    case GgmlType::Q5_1:
      dequant_q5_1(src, dst, nb);
      break;
    case GgmlType::Q8_0:
      dequant_q8_0(src, dst, nb);
      break;
    case GgmlType::Q2_K:
      dequant_q2_k(src, dst, nb);
      break;
    case GgmlType::Q3_K:
      dequant_q3_k(src, dst, nb);
      break;
    case GgmlType::Q4_K:
      dequant_q4_k(src, dst, nb);
      break;
    case GgmlType::Q5_K:
      dequant_q5_k(src, dst, nb);
      break;
    case GgmlType::Q6_K:
      dequant_q6_k(src, dst, nb);
      break;
    default:
      throw Error(std::string("dequantizing ggml type ") + tr.name + " is not supported");
  }
}

}  // namespace headscope::io
