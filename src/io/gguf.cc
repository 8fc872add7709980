// GGUF parsing/validation (layout in gguf.h) and dequantization of ggml block formats to fp32.
// The block layouts follow ggml-common.h; each kernel below states its block in a comment.
#include "io/gguf.h"

#include <algorithm>
#include <bit>
#include <cstring>
#include <limits>
#include <string_view>

#include "io/float_bits.h"

// Bit-exactness with ggml's reference dequantizers (and gguf-py) holds whether or not the
// compiler fuses `d * q - m` into one FMA: every scale is an f16 (11 significant bits) times a
// small integer, so the products are exact in fp32 and only the final add/subtract rounds.

namespace headscope::io {

static_assert(std::endian::native == std::endian::little, "GGUF stores little-endian data");

namespace {

// ---------------------------------------------------------------------------------------------
// Type tables

struct TypeTraits {
  GgmlType type;
  const char* name;
  int64_t block_size;  // values per block
  size_t type_size;    // bytes per block
  bool dequantize;     // supported by dequantize_row
};

constexpr int64_t QK = 32;    // block size of the classic formats (ggml QK4_0, QK8_0, ...)
constexpr int64_t QK_K = 256; // super-block size of the K-quants

// Sizes from ggml-common.h / gguf-py GGML_QUANT_SIZES. Types we cannot dequantize are still
// listed so a file containing them opens and can be inspected.
constexpr TypeTraits kGgmlTypes[] = {
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

const TypeTraits* find_ggml_type(uint32_t raw) {
  for (const auto& t : kGgmlTypes)
    if (static_cast<uint32_t>(t.type) == raw) return &t;
  return nullptr;
}

const TypeTraits& traits(GgmlType type) {
  const TypeTraits* t = find_ggml_type(static_cast<uint32_t>(type));
  if (t == nullptr) throw Error("unknown ggml type " + std::to_string(static_cast<uint32_t>(type)));
  return *t;
}

constexpr const char* kGgufTypeNames[] = {"UINT8", "INT8",  "UINT16", "INT16",  "UINT32", "INT32", "FLOAT32",
                                          "BOOL",  "STRING", "ARRAY", "UINT64", "INT64",  "FLOAT64"};
constexpr uint32_t kGgufTypeCount = 13;

// Bytes of one scalar of `t` in the file; 0 for STRING/ARRAY (variable length).
size_t scalar_size(GgufType t) {
  switch (t) {
    case GgufType::UINT8: case GgufType::INT8: case GgufType::BOOL: return 1;
    case GgufType::UINT16: case GgufType::INT16: return 2;
    case GgufType::UINT32: case GgufType::INT32: case GgufType::FLOAT32: return 4;
    case GgufType::UINT64: case GgufType::INT64: case GgufType::FLOAT64: return 8;
    default: return 0;
  }
}

bool is_int_type(GgufType t) {
  switch (t) {
    case GgufType::UINT8: case GgufType::INT8: case GgufType::UINT16: case GgufType::INT16:
    case GgufType::UINT32: case GgufType::INT32: case GgufType::UINT64: case GgufType::INT64: return true;
    default: return false;
  }
}

bool is_unsigned_type(GgufType t) {
  return t == GgufType::UINT8 || t == GgufType::UINT16 || t == GgufType::UINT32 || t == GgufType::UINT64 ||
         t == GgufType::BOOL;
}

template <class T>
T load(const uint8_t* p) {
  T v;
  std::memcpy(&v, p, sizeof v);
  return v;
}

// Decodes one fixed-size scalar at p into the matching field(s) of v.
void decode_scalar(GgufType t, const uint8_t* p, GgufValue& v) {
  switch (t) {
    case GgufType::UINT8: v.u = load<uint8_t>(p); break;
    case GgufType::INT8: v.i = load<int8_t>(p); break;
    case GgufType::UINT16: v.u = load<uint16_t>(p); break;
    case GgufType::INT16: v.i = load<int16_t>(p); break;
    case GgufType::UINT32: v.u = load<uint32_t>(p); break;
    case GgufType::INT32: v.i = load<int32_t>(p); break;
    case GgufType::FLOAT32: v.f = load<float>(p); break;
    case GgufType::BOOL: v.u = load<uint8_t>(p) != 0; break;
    case GgufType::UINT64: v.u = load<uint64_t>(p); break;
    case GgufType::INT64: v.i = load<int64_t>(p); break;
    case GgufType::FLOAT64: v.f = load<double>(p); break;
    default: break;
  }
}

// A bounds-checked read position in the mapped file. Every read first checks that the bytes
// exist, so a corrupt length or count produces an Error naming what was being read.
class Cursor {
 public:
  Cursor(const uint8_t* base, size_t size, const std::string& path) : base_(base), size_(size), path_(path) {}
  size_t pos() const { return pos_; }
  size_t remaining() const { return size_ - pos_; }

  void need(uint64_t n, const std::string& what) const {
    if (n > remaining())
      throw Error(path_ + ": truncated: " + what + " needs " + std::to_string(n) + " bytes at offset " +
                  std::to_string(pos_) + " but the file ends after " + std::to_string(remaining()) + " more");
  }
  template <class T>
  T read(const std::string& what) {
    need(sizeof(T), what);
    T v = load<T>(base_ + pos_);
    pos_ += sizeof(T);
    return v;
  }
  const uint8_t* skip(uint64_t n, const std::string& what) {
    need(n, what);
    const uint8_t* p = base_ + pos_;
    pos_ += static_cast<size_t>(n);
    return p;
  }
  std::string_view read_string(const std::string& what) {
    const uint64_t len = read<uint64_t>(what + " length");
    const uint8_t* p = skip(len, what + " (" + std::to_string(len) + " bytes)");
    return {reinterpret_cast<const char*>(p), static_cast<size_t>(len)};
  }

 private:
  const uint8_t* base_;
  size_t size_;
  size_t pos_ = 0;
  const std::string& path_;
};

// Smallest encodings, used to reject counts that could not fit in the rest of the file before
// anything is allocated for them.
constexpr uint64_t kMinKvBytes = 8 + 4 + 1;          // empty key, type, 1-byte value
constexpr uint64_t kMinTensorInfoBytes = 8 + 4 + 4 + 8;  // empty name, n_dims = 0, type, offset
constexpr uint32_t kMaxDims = 4;                      // GGML_MAX_DIMS
constexpr uint64_t kDefaultAlignment = 32;            // GGUF_DEFAULT_ALIGNMENT

std::string dims_str(const std::vector<int64_t>& d) {
  std::string s = "[";
  for (size_t i = 0; i < d.size(); ++i) s += (i ? ", " : "") + std::to_string(d[i]);
  return s + "]";
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
    const uint32_t qh = load<uint32_t>(x + 2);
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
    const uint32_t qh = load<uint32_t>(x + 4);
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

const char* ggml_type_name(GgmlType t) {
  const TypeTraits* tr = find_ggml_type(static_cast<uint32_t>(t));
  return tr ? tr->name : "unknown";
}
int64_t ggml_block_size(GgmlType t) { return traits(t).block_size; }
size_t ggml_type_size(GgmlType t) { return traits(t).type_size; }
bool ggml_can_dequantize(GgmlType t) {
  const TypeTraits* tr = find_ggml_type(static_cast<uint32_t>(t));
  return tr != nullptr && tr->dequantize;
}

const char* gguf_type_name(GgufType t) {
  const auto i = static_cast<uint32_t>(t);
  return i < kGgufTypeCount ? kGgufTypeNames[i] : "unknown";
}

void dequantize_row(GgmlType type, const uint8_t* src, float* dst, int64_t n) {
  const TypeTraits& tr = traits(type);
  if (!tr.dequantize) throw Error(std::string("dequantizing ggml type ") + tr.name + " is not supported");
  if (n < 0 || n % tr.block_size != 0)
    throw Error(std::string("dequantize_row: ") + std::to_string(n) + " values is not a whole number of " + tr.name +
                " blocks of " + std::to_string(tr.block_size));
  const int64_t nb = n / tr.block_size;
  switch (type) {
    case GgmlType::F32: if (n > 0) std::memcpy(dst, src, static_cast<size_t>(n) * 4); break;
    case GgmlType::F16: f16_to_f32_row(src, dst, static_cast<size_t>(n)); break;
    case GgmlType::BF16: bf16_to_f32_row(src, dst, static_cast<size_t>(n)); break;
    case GgmlType::F64:
      for (int64_t i = 0; i < n; ++i) dst[i] = static_cast<float>(load<double>(src + 8 * i));
      break;
    case GgmlType::Q4_0: dequant_q4_0(src, dst, nb); break;
    case GgmlType::Q4_1: dequant_q4_1(src, dst, nb); break;
    case GgmlType::Q5_0: dequant_q5_0(src, dst, nb); break;
    case GgmlType::Q5_1: dequant_q5_1(src, dst, nb); break;
    case GgmlType::Q8_0: dequant_q8_0(src, dst, nb); break;
    case GgmlType::Q2_K: dequant_q2_k(src, dst, nb); break;
    case GgmlType::Q3_K: dequant_q3_k(src, dst, nb); break;
    case GgmlType::Q4_K: dequant_q4_k(src, dst, nb); break;
    case GgmlType::Q5_K: dequant_q5_k(src, dst, nb); break;
    case GgmlType::Q6_K: dequant_q6_k(src, dst, nb); break;
    default: throw Error(std::string("dequantizing ggml type ") + tr.name + " is not supported");
  }
}

// ---------------------------------------------------------------------------------------------
// GgufTensorInfo

int64_t GgufTensorInfo::numel() const {
  int64_t n = 1;
  for (int64_t d : ne) n *= d;
  return n;
}

std::vector<int64_t> GgufTensorInfo::shape() const { return std::vector<int64_t>(ne.rbegin(), ne.rend()); }

// ---------------------------------------------------------------------------------------------
// GgufFile: parsing

GgufFile::GgufFile(const std::string& path) : file_(std::make_unique<MappedFile>(path)) {
  Cursor in(file_->data(), file_->size(), file_->path());
  const std::string& p = file_->path();

  // ---- header ----
  if (file_->size() < 4 || std::memcmp(file_->data(), "GGUF", 4) != 0)
    throw Error(p + ": not a GGUF file (it does not start with the magic \"GGUF\")");
  in.skip(4, "magic");
  version_ = in.read<uint32_t>("version");
  if (version_ != 2 && version_ != 3) {
    const uint32_t swapped = __builtin_bswap32(version_);
    if (swapped == 2 || swapped == 3)
      throw Error(p + ": big-endian GGUF files are not supported; convert it with gguf-py's gguf-convert-endian");
    if (version_ == 1)
      throw Error(p + ": GGUF version 1 is obsolete; re-convert the model with a current llama.cpp");
    throw Error(p + ": unsupported GGUF version " + std::to_string(version_) + " (this reader handles 2 and 3)");
  }
  const uint64_t tensor_count = in.read<uint64_t>("tensor_count");
  const uint64_t kv_count = in.read<uint64_t>("metadata_kv_count");
  if (kv_count > in.remaining() / kMinKvBytes)
    throw Error(p + ": metadata_kv_count " + std::to_string(kv_count) + " cannot fit in the " +
                std::to_string(in.remaining()) + " bytes left (corrupt header)");
  if (tensor_count > in.remaining() / kMinTensorInfoBytes)
    throw Error(p + ": tensor_count " + std::to_string(tensor_count) + " cannot fit in the " +
                std::to_string(in.remaining()) + " bytes left (corrupt header)");

  // ---- metadata ----
  key_order_.reserve(static_cast<size_t>(kv_count));
  for (uint64_t k = 0; k < kv_count; ++k) {
    const std::string kth = "metadata key #" + std::to_string(k);
    std::string key(in.read_string(kth));
    const std::string where = "metadata '" + key + "'";
    if (metadata_.count(key)) throw Error(p + ": duplicate " + where);
    const uint32_t raw_type = in.read<uint32_t>(where + " type");
    if (raw_type >= kGgufTypeCount)
      throw Error(p + ": " + where + " has unknown value type " + std::to_string(raw_type));
    GgufValue v;
    v.type = static_cast<GgufType>(raw_type);
    if (v.type == GgufType::STRING) {
      v.s = std::string(in.read_string(where));
    } else if (v.type == GgufType::ARRAY) {
      const uint32_t raw_elem = in.read<uint32_t>(where + " element type");
      if (raw_elem >= kGgufTypeCount)
        throw Error(p + ": " + where + " is an array of unknown type " + std::to_string(raw_elem));
      v.elem_type = static_cast<GgufType>(raw_elem);
      if (v.elem_type == GgufType::ARRAY) throw Error(p + ": " + where + " is an array of arrays, which GGUF readers do not support");
      v.count = in.read<uint64_t>(where + " element count");
      const size_t begin = in.pos();
      if (v.elem_type == GgufType::STRING) {
        if (v.count > in.remaining() / 8)
          throw Error(p + ": " + where + " claims " + std::to_string(v.count) + " strings, more than the " +
                      std::to_string(in.remaining()) + " bytes left can hold");
        for (uint64_t e = 0; e < v.count; ++e) in.read_string(where + " element " + std::to_string(e));
      } else {
        const size_t es = scalar_size(v.elem_type);
        if (v.count > in.remaining() / es)
          throw Error(p + ": " + where + " claims " + std::to_string(v.count) + " " + gguf_type_name(v.elem_type) +
                      " elements, more than the " + std::to_string(in.remaining()) + " bytes left can hold");
        in.skip(v.count * es, where + " elements");
      }
      v.elems = file_->data() + begin;
      v.elems_nbytes = in.pos() - begin;
    } else {
      decode_scalar(v.type, in.skip(scalar_size(v.type), where + " value"), v);
    }
    key_order_.push_back(key);
    metadata_.emplace(std::move(key), std::move(v));
  }

  if (has("general.alignment")) {
    const GgufValue& a = value("general.alignment");
    if (!is_int_type(a.type) || !is_unsigned_type(a.type))
      throw Error(p + ": metadata 'general.alignment' must be an unsigned integer, got " + gguf_type_name(a.type));
    if (a.u == 0 || (a.u & (a.u - 1)) != 0 || a.u > (1u << 30))
      throw Error(p + ": metadata 'general.alignment' is " + std::to_string(a.u) + ", expected a power of two");
    alignment_ = a.u;
  } else {
    alignment_ = kDefaultAlignment;
  }

  // ---- tensor infos ----
  tensor_order_.reserve(static_cast<size_t>(tensor_count));
  for (uint64_t t = 0; t < tensor_count; ++t) {
    GgufTensorInfo info;
    info.name = std::string(in.read_string("name of tensor #" + std::to_string(t)));
    const std::string where = p + ": tensor '" + info.name + "'";
    if (tensors_.count(info.name)) throw Error(where + ": duplicate tensor name");
    const uint32_t n_dims = in.read<uint32_t>("n_dims of tensor '" + info.name + "'");
    if (n_dims > kMaxDims)
      throw Error(where + ": " + std::to_string(n_dims) + " dimensions, at most " + std::to_string(kMaxDims) + " allowed");
    for (uint32_t i = 0; i < n_dims; ++i) {
      const uint64_t d = in.read<uint64_t>("dims of tensor '" + info.name + "'");
      if (d > static_cast<uint64_t>(std::numeric_limits<int64_t>::max()))
        throw Error(where + ": dimension " + std::to_string(i) + " is " + std::to_string(d) + " (corrupt)");
      info.ne.push_back(static_cast<int64_t>(d));
    }
    const uint32_t raw_type = in.read<uint32_t>("type of tensor '" + info.name + "'");
    const TypeTraits* tr = find_ggml_type(raw_type);
    if (tr == nullptr)
      throw Error(where + ": unknown ggml type " + std::to_string(raw_type) +
                  " (a quantization newer than this reader; re-quantize to Q8_0, Q4_K or F16)");
    info.type = tr->type;
    info.offset = in.read<uint64_t>("offset of tensor '" + info.name + "'");

    int64_t numel = 1;
    for (int64_t d : info.ne)
      if (__builtin_mul_overflow(numel, d, &numel))
        throw Error(where + ": dims " + dims_str(info.ne) + " overflow a 64-bit element count");
    const int64_t row = info.ne.empty() ? 1 : info.ne[0];
    if (row % tr->block_size != 0)
      throw Error(where + ": ne[0] = " + std::to_string(row) + " is not a multiple of the " + tr->name +
                  " block size " + std::to_string(tr->block_size));
    uint64_t nbytes;
    if (__builtin_mul_overflow(static_cast<uint64_t>(numel / tr->block_size), static_cast<uint64_t>(tr->type_size), &nbytes))
      throw Error(where + ": dims " + dims_str(info.ne) + " overflow a 64-bit byte count");
    info.nbytes = static_cast<size_t>(nbytes);
    tensor_order_.push_back(info.name);
    tensors_.emplace(info.name, std::move(info));
  }

  // ---- data section ----
  const uint64_t end_of_infos = in.pos();
  data_offset_ = (end_of_infos + alignment_ - 1) / alignment_ * alignment_;
  const uint64_t data_size = file_->size() > data_offset_ ? file_->size() - data_offset_ : 0;
  for (auto& [name, info] : tensors_) {
    const std::string where = p + ": tensor '" + name + "'";
    if (info.offset % alignment_ != 0)
      throw Error(where + ": offset " + std::to_string(info.offset) + " is not a multiple of the alignment " +
                  std::to_string(alignment_));
    if (info.offset > data_size || info.nbytes > data_size - info.offset)
      throw Error(where + ": data [" + std::to_string(info.offset) + ", +" + std::to_string(info.nbytes) +
                  ") lies past the end of the data section (" + std::to_string(data_size) +
                  " bytes; truncated download?)");
    info.data = file_->data() + data_offset_ + info.offset;
  }
  // Writers (gguf-py, llama.cpp) place the tensors one after another, each padded to the
  // alignment. So in order of offset, a tensor's bytes (from its type and shape) must fill the
  // space up to the next tensor but for less than `alignment` bytes of padding: a type changed to
  // a smaller one, or a wrong dimension, leaves a larger gap and would be read as garbage; a
  // larger one overlaps the next tensor. The file ends at the last tensor's end, or at that end
  // rounded up to the alignment (both writers pad after every tensor, the last included).
  std::vector<const GgufTensorInfo*> by_offset;
  for (const auto& [name, info] : tensors_)
    if (info.nbytes > 0) by_offset.push_back(&info);
  std::sort(by_offset.begin(), by_offset.end(),
            [](const GgufTensorInfo* a, const GgufTensorInfo* b) { return a->offset < b->offset; });
  for (size_t i = 0; i < by_offset.size(); ++i) {
    const GgufTensorInfo& t = *by_offset[i];
    const uint64_t end = t.offset + t.nbytes;  // <= data_size, checked above
    const bool last = i + 1 == by_offset.size();
    const uint64_t next = last ? data_size : by_offset[i + 1]->offset;
    const std::string next_name = last ? std::string("the end of the file") : "tensor '" + by_offset[i + 1]->name + "'";
    if (!last && end > next)
      throw Error(p + ": tensor '" + by_offset[i + 1]->name + "': data overlaps tensor '" + t.name +
                  "' (corrupt tensor offsets)");
    const uint64_t padded_end = (end + alignment_ - 1) / alignment_ * alignment_;
    if (last ? next != end && next != padded_end : next - end >= alignment_)
      throw Error(p + ": tensor '" + t.name + "': its " + ggml_type_name(t.type) + " data of shape " +
                  dims_str(t.shape()) + " is " + std::to_string(t.nbytes) + " bytes, but " + next_name + " is " +
                  std::to_string(next - t.offset) + " bytes after its start (not just the padding to the alignment; " +
                  "corrupt type or dimensions)");
  }
}

// ---------------------------------------------------------------------------------------------
// GgufFile: metadata access

const GgufValue& GgufFile::value(const std::string& key) const {
  auto it = metadata_.find(key);
  if (it == metadata_.end()) throw Error(path() + ": no metadata key '" + key + "'");
  return it->second;
}

namespace {

[[noreturn]] void wrong_type(const std::string& path, const std::string& key, const GgufValue& v, const char* want) {
  std::string got = gguf_type_name(v.type);
  if (v.type == GgufType::ARRAY) got += std::string(" of ") + gguf_type_name(v.elem_type);
  throw Error(path + ": metadata '" + key + "' is " + got + ", expected " + want);
}

int64_t as_int(const std::string& path, const std::string& key, GgufType t, const GgufValue& v) {
  if (is_unsigned_type(t)) {
    if (v.u > static_cast<uint64_t>(std::numeric_limits<int64_t>::max()))
      throw Error(path + ": metadata '" + key + "' value " + std::to_string(v.u) + " does not fit in int64");
    return static_cast<int64_t>(v.u);
  }
  return v.i;
}

}  // namespace

std::string GgufFile::get_string(const std::string& key) const {
  const GgufValue& v = value(key);
  if (v.type != GgufType::STRING) wrong_type(path(), key, v, "STRING");
  return v.s;
}
std::string GgufFile::get_string(const std::string& key, const std::string& fallback) const {
  return has(key) ? get_string(key) : fallback;
}

int64_t GgufFile::get_int(const std::string& key) const {
  const GgufValue& v = value(key);
  if (!is_int_type(v.type)) wrong_type(path(), key, v, "an integer");
  return as_int(path(), key, v.type, v);
}
int64_t GgufFile::get_int(const std::string& key, int64_t fallback) const { return has(key) ? get_int(key) : fallback; }

double GgufFile::get_float(const std::string& key) const {
  const GgufValue& v = value(key);
  if (v.type == GgufType::FLOAT32 || v.type == GgufType::FLOAT64) return v.f;
  if (is_int_type(v.type)) return is_unsigned_type(v.type) ? static_cast<double>(v.u) : static_cast<double>(v.i);
  wrong_type(path(), key, v, "a number");
}
double GgufFile::get_float(const std::string& key, double fallback) const { return has(key) ? get_float(key) : fallback; }

bool GgufFile::get_bool(const std::string& key) const {
  const GgufValue& v = value(key);
  if (v.type != GgufType::BOOL) wrong_type(path(), key, v, "BOOL");
  return v.u != 0;
}
bool GgufFile::get_bool(const std::string& key, bool fallback) const { return has(key) ? get_bool(key) : fallback; }

std::vector<std::string> GgufFile::get_string_array(const std::string& key) const {
  const GgufValue& v = value(key);
  if (v.type != GgufType::ARRAY || v.elem_type != GgufType::STRING) wrong_type(path(), key, v, "ARRAY of STRING");
  // The element bytes were length-checked on open, so walking them again cannot overrun.
  std::vector<std::string> out;
  out.reserve(static_cast<size_t>(v.count));
  const uint8_t* q = v.elems;
  for (uint64_t e = 0; e < v.count; ++e) {
    const uint64_t len = load<uint64_t>(q);
    out.emplace_back(reinterpret_cast<const char*>(q + 8), static_cast<size_t>(len));
    q += 8 + len;
  }
  return out;
}

std::vector<int64_t> GgufFile::get_int_array(const std::string& key) const {
  const GgufValue& v = value(key);
  if (v.type != GgufType::ARRAY || !(is_int_type(v.elem_type) || v.elem_type == GgufType::BOOL))
    wrong_type(path(), key, v, "ARRAY of integers");
  const size_t es = scalar_size(v.elem_type);
  std::vector<int64_t> out(static_cast<size_t>(v.count));
  for (size_t e = 0; e < out.size(); ++e) {
    GgufValue tmp;
    decode_scalar(v.elem_type, v.elems + e * es, tmp);
    out[e] = as_int(path(), key, v.elem_type, tmp);
  }
  return out;
}

std::vector<float> GgufFile::get_float_array(const std::string& key) const {
  const GgufValue& v = value(key);
  if (v.type != GgufType::ARRAY || !(v.elem_type == GgufType::FLOAT32 || v.elem_type == GgufType::FLOAT64 ||
                                     is_int_type(v.elem_type)))
    wrong_type(path(), key, v, "ARRAY of numbers");
  const size_t es = scalar_size(v.elem_type);
  std::vector<float> out(static_cast<size_t>(v.count));
  for (size_t e = 0; e < out.size(); ++e) {
    GgufValue tmp;
    decode_scalar(v.elem_type, v.elems + e * es, tmp);
    if (v.elem_type == GgufType::FLOAT32 || v.elem_type == GgufType::FLOAT64) out[e] = static_cast<float>(tmp.f);
    else out[e] = is_unsigned_type(v.elem_type) ? static_cast<float>(tmp.u) : static_cast<float>(tmp.i);
  }
  return out;
}

// ---------------------------------------------------------------------------------------------
// GgufFile: tensors

const GgufTensorInfo& GgufFile::tensor(const std::string& name) const {
  auto it = tensors_.find(name);
  if (it == tensors_.end())
    throw Error(path() + ": no tensor '" + name + "' among " + std::to_string(tensors_.size()) + " tensors");
  return it->second;
}

Tensor GgufFile::to_f32(const std::string& name, const std::vector<int64_t>& shape) const {
  const GgufTensorInfo& t = tensor(name);
  const std::vector<int64_t> stored = t.shape();
  if (!shape.empty() && shape != stored)
    throw Error(path() + ": tensor '" + name + "': shape " + dims_str(stored) + " (ggml ne " + dims_str(t.ne) +
                "), expected " + dims_str(shape));
  const TypeTraits& tr = traits(t.type);
  if (!tr.dequantize)
    throw Error(path() + ": tensor '" + name + "' is stored as " + tr.name +
                ", which headscope cannot dequantize (supported: F32 F16 BF16 F64 Q4_0 Q4_1 Q5_0 Q5_1 Q8_0 Q2_K Q3_K "
                "Q4_K Q5_K Q6_K)");
  Tensor out(stored, Tensor::Uninitialized{});  // dequantize_row writes every value
  // One sequential pass: conversion runs near memory speed (about 3 ns per value on the
  // reference machine for a whole Q4_1 model, half of it first-touch page faults of `out`), so
  // threads would buy little at load time and contend with everything else on two cores.
  dequantize_row(t.type, t.data, out.ptr(), t.numel());
  return out;
}

}  // namespace headscope::io
