// ggml block formats (io/gguf_quants.h): blocks packed by hand in each test from the layout that
// ggml-common.h documents, so every expected value follows from the format's formula and not from
// any dequantizer; the type table's sizes; unsupported types and partial blocks refused; the
// vector kernels (AVX2, AVX-512) against the scalar loop, bit for bit, on random blocks; and the
// exactness of the scale products that makes the result independent of FMA contraction.
#include "io/gguf_quants.h"

#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "io/float_bits.h"
#include "kernel_paths.h"
#include "test_support.h"

using namespace headscope::io;
using headscope::testing::expect_error;
namespace cpu = headscope::cpu;

namespace {

void put_f16(uint8_t* p, uint16_t bits) { std::memcpy(p, &bits, 2); }

TEST(GgufDequant, Q8_0Block) {
  uint8_t block[34];
  put_f16(block, 0x3800);  // d = 0.5
  for (int j = 0; j < 32; ++j) block[2 + j] = static_cast<uint8_t>(static_cast<int8_t>(j * 8 - 128));
  float y[32];
  dequantize_row(GgmlType::Q8_0, block, y, 32);
  for (int j = 0; j < 32; ++j) EXPECT_EQ(y[j], (j * 8 - 128) * 0.5f) << j;
}

TEST(GgufDequant, Q4_0Block) {
  uint8_t block[18];
  put_f16(block, 0x4000);  // d = 2
  for (int j = 0; j < 16; ++j) block[2 + j] = static_cast<uint8_t>(j | ((15 - j) << 4));
  float y[32];
  dequantize_row(GgmlType::Q4_0, block, y, 32);
  for (int j = 0; j < 16; ++j) {
    EXPECT_EQ(y[j], (j - 8) * 2.0f) << j;            // low nibbles: first 16 values
    EXPECT_EQ(y[j + 16], (15 - j - 8) * 2.0f) << j;  // high nibbles: last 16
  }
}

TEST(GgufDequant, Q5_0BlockTakesTheFifthBitFromQh) {
  // block_q5_0: f16 d; u32 qh; u8 qs[16]. Value j has low 4 bits from nibble j of qs (low
  // nibbles first), its 5th bit from bit j of qh; x = (q - 16) * d.
  int q[32];
  for (int j = 0; j < 32; ++j) q[j] = (j * 11 + 5) % 32;
  uint8_t block[22] = {};
  put_f16(block, 0xB800);  // d = -0.5
  uint32_t qh = 0;
  for (int j = 0; j < 32; ++j) qh |= static_cast<uint32_t>(q[j] >> 4) << j;
  std::memcpy(block + 2, &qh, 4);
  for (int j = 0; j < 16; ++j) block[6 + j] = static_cast<uint8_t>((q[j] & 0xF) | ((q[j + 16] & 0xF) << 4));
  float y[32];
  dequantize_row(GgmlType::Q5_0, block, y, 32);
  for (int j = 0; j < 32; ++j) EXPECT_EQ(y[j], static_cast<float>(q[j] - 16) * -0.5f) << j;
}

TEST(GgufDequant, Q4_KBlockWithSixBitScales) {
  // Scales/mins above 15 and 31 exercise the split 6-bit packing of the 12-byte table.
  const int sc[8] = {1, 2, 3, 4, 17, 33, 50, 63};
  const int mn[8] = {0, 5, 10, 63, 16, 20, 47, 1};
  uint8_t block[144] = {};
  put_f16(block, 0x3C00);      // d = 1
  put_f16(block + 2, 0x3800);  // dmin = 0.5
  uint8_t* t = block + 4;
  for (int j = 0; j < 4; ++j) {
    t[j] = static_cast<uint8_t>(sc[j]);
    t[j + 4] = static_cast<uint8_t>(mn[j]);
  }
  for (int j = 4; j < 8; ++j) {
    t[j + 4] = static_cast<uint8_t>((sc[j] & 0xF) | ((mn[j] & 0xF) << 4));
    t[j - 4] |= static_cast<uint8_t>((sc[j] >> 4) << 6);
    t[j] |= static_cast<uint8_t>((mn[j] >> 4) << 6);
  }
  // Value v of sub-block s: low nibble for even s, high for odd; make q = (s + l) % 16.
  for (int c = 0; c < 4; ++c)
    for (int l = 0; l < 32; ++l)
      block[16 + 32 * c + l] = static_cast<uint8_t>(((2 * c + l) % 16) | (((2 * c + 1 + l) % 16) << 4));
  float y[256];
  dequantize_row(GgmlType::Q4_K, block, y, 256);
  for (int s = 0; s < 8; ++s)
    for (int l = 0; l < 32; ++l)
      ASSERT_EQ(y[32 * s + l], static_cast<float>(sc[s] * ((s + l) % 16)) - 0.5f * mn[s])
          << "sub-block " << s << " l " << l;
}

TEST(GgufDequant, Q6_KBlock) {
  // Pack chosen 6-bit values with the documented layout, then expect d * scale * q.
  int q[256];
  for (int p = 0; p < 256; ++p) q[p] = (p * 7 + 3) % 64 - 32;
  uint8_t block[210] = {};
  for (int h = 0; h < 2; ++h)
    for (int l = 0; l < 32; ++l) {
      const int q1 = q[128 * h + l] + 32, q2 = q[128 * h + l + 32] + 32;
      const int q3 = q[128 * h + l + 64] + 32, q4 = q[128 * h + l + 96] + 32;
      block[64 * h + l] = static_cast<uint8_t>((q1 & 0xF) | ((q3 & 0xF) << 4));
      block[64 * h + l + 32] = static_cast<uint8_t>((q2 & 0xF) | ((q4 & 0xF) << 4));
      block[128 + 32 * h + l] =
          static_cast<uint8_t>((q1 >> 4) | ((q2 >> 4) << 2) | ((q3 >> 4) << 4) | ((q4 >> 4) << 6));
    }
  for (int i = 0; i < 16; ++i) block[192 + i] = static_cast<uint8_t>(static_cast<int8_t>(i - 8));
  put_f16(block + 208, 0x3400);  // d = 0.25
  float y[256];
  dequantize_row(GgmlType::Q6_K, block, y, 256);
  for (int p = 0; p < 256; ++p) ASSERT_EQ(y[p], 0.25f * static_cast<float>(p / 16 - 8) * static_cast<float>(q[p])) << p;
}

TEST(GgufDequant, TypeTableAndUnsupported) {
  EXPECT_EQ(ggml_type_size(GgmlType::Q4_K), 144u);
  EXPECT_EQ(ggml_block_size(GgmlType::Q4_K), 256);
  EXPECT_EQ(ggml_type_size(GgmlType::Q6_K), 210u);
  EXPECT_EQ(ggml_type_size(GgmlType::Q5_1), 24u);
  EXPECT_STREQ(ggml_type_name(GgmlType::IQ4_XS), "IQ4_XS");
  EXPECT_FALSE(ggml_can_dequantize(GgmlType::IQ2_XXS));
  uint8_t block[18] = {};
  float y[32];
  expect_error([&] { dequantize_row(GgmlType::IQ4_NL, block, y, 32); }, {"IQ4_NL", "not supported"});
  expect_error([&] { dequantize_row(GgmlType::Q4_0, block, y, 31); }, {"Q4_0", "32"});
}

// ---------------------------------------------------------------------------------------------
// Every instruction-set path against the portable loop (the slow twin), bit for bit.

// The block types with vector kernels, and where each keeps its f16 scales (byte offsets).
struct BlockType {
  GgmlType type;
  std::vector<int> f16_offsets;
};
const BlockType kBlockTypes[] = {
    {GgmlType::Q4_0, {0}},    {GgmlType::Q4_1, {0, 2}},   {GgmlType::Q5_0, {0}},   {GgmlType::Q5_1, {0, 2}},
    {GgmlType::Q8_0, {0}},    {GgmlType::Q2_K, {80, 82}}, {GgmlType::Q3_K, {108}}, {GgmlType::Q4_K, {0, 2}},
    {GgmlType::Q5_K, {0, 2}}, {GgmlType::Q6_K, {208}},
};

// nb random blocks of `type` after one byte of padding (so that no block is aligned, as in a
// file): every byte random, except that an f16 scale drawn as inf or NaN is drawn again (values
// may still be large: the kernels must agree on them too).
std::vector<uint8_t> random_padded_blocks(const BlockType& bt, int64_t nb, unsigned seed) {
  const size_t size = ggml_type_size(bt.type);
  std::vector<uint8_t> bytes(1 + size * size_t(nb));
  std::mt19937 rng(seed);
  for (uint8_t& byte : bytes) byte = uint8_t(rng());
  for (int64_t b = 0; b < nb; ++b)
    for (int offset : bt.f16_offsets) {
      uint8_t* p = bytes.data() + 1 + size * size_t(b) + size_t(offset);
      uint16_t h;
      do h = uint16_t(rng());
      while (((h >> 10) & 0x1F) == 0x1F);
      std::memcpy(p, &h, 2);
    }
  return bytes;
}

// The values dequantize_row writes on `isa`, at dst + 1 (unaligned), with a sentinel after them.
std::vector<float> dequantize_on(cpu::Isa isa, GgmlType type, const uint8_t* src, int64_t n) {
  const cpu::Isa previous = cpu::set_isa_for_testing(isa);
  std::vector<float> out(size_t(n) + 2, -7.0f);
  dequantize_row(type, src, out.data() + 1, n);
  cpu::set_isa_for_testing(previous);
  return out;
}

class DequantPath : public headscope::testing::KernelPathTest {};

TEST_P(DequantPath, EveryBlockTypeMatchesThePortableLoopBitForBit) {
  for (const BlockType& bt : kBlockTypes)
    for (int64_t nb : {1, 2, 3, 7, 64}) {
      const std::vector<uint8_t> bytes = random_padded_blocks(bt, nb, unsigned(bt.type) * 100 + unsigned(nb));
      const int64_t n = nb * ggml_block_size(bt.type);
      const std::vector<float> twin = dequantize_on(cpu::Isa::portable, bt.type, bytes.data() + 1, n);
      const std::vector<float> fast = dequantize_on(GetParam(), bt.type, bytes.data() + 1, n);
      ASSERT_EQ(fast.front(), -7.0f) << ggml_type_name(bt.type) << " wrote before dst";
      ASSERT_EQ(fast.back(), -7.0f) << ggml_type_name(bt.type) << " wrote past dst + n";
      for (int64_t i = 1; i <= n; ++i) {
        const float want = twin[size_t(i)], got = fast[size_t(i)];
        ASSERT_TRUE(std::isfinite(want)) << ggml_type_name(bt.type) << " value " << i - 1;
        ASSERT_EQ(std::bit_cast<uint32_t>(got), std::bit_cast<uint32_t>(want))
            << ggml_type_name(bt.type) << ", " << nb << " blocks: value " << i - 1 << " is " << got
            << ", the portable loop " << want;
      }
    }
}

INSTANTIATE_KERNEL_PATHS(DequantPath);

// The rounding argument of gguf_quants.cc: every product a dequantizer forms — an f16 scale d
// times an integer scale s, times a quant q — is exact in fp32, so `d·s·q ± m` rounds once
// whether or not it is computed with an FMA. The widest factors are Q6_K's (s an i8, q in
// [−32, 31]); the others' ranges lie inside them. Exactness depends on d's significand only
// (fp32's exponent range holds every such product of an f16), so d runs over all 1024 f16
// significands in [1, 2) and the extremes. fma(a, b, −a·b) is the product's rounding error.
TEST(GgufDequant, ScaleProductsAreExactInFp32) {
  std::vector<float> scales;
  for (uint16_t m = 0; m < 1024; ++m) scales.push_back(f16_bits_to_f32(uint16_t(0x3C00 | m)));
  for (uint16_t bits : {0x0001, 0x03FF, 0x0400, 0x7BFF, 0xFBFF}) scales.push_back(f16_bits_to_f32(bits));
  int64_t inexact = 0;
  for (float d : scales)
    for (int s = -128; s <= 127; ++s) {
      const float ds = d * float(s);
      inexact += std::fma(d, float(s), -ds) != 0.0f;
      for (int q = -32; q <= 31; ++q) {
        const float dsq = ds * float(q);
        inexact += std::fma(ds, float(q), -dsq) != 0.0f;
      }
    }
  EXPECT_EQ(inexact, 0);
  // The check can fail: an odd 14-bit integer times a full f16 significand needs 25 bits.
  const float d = f16_bits_to_f32(0x3FFF), wide = 16383.0f;
  EXPECT_NE(std::fma(d, wide, -(d * wide)), 0.0f);
}

}  // namespace
