// ggml block formats (io/gguf_quants.h): blocks packed by hand in each test from the layout that
// ggml-common.h documents, so every expected value follows from the format's formula and not from
// any dequantizer; the type table's sizes; unsupported types and partial blocks refused.
#include "io/gguf_quants.h"

#include <gtest/gtest.h>

#include <cstring>

#include "test_support.h"

using namespace headscope::io;
using headscope::testing::expect_error;

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
    EXPECT_EQ(y[j], (j - 8) * 2.0f) << j;             // low nibbles: first 16 values
    EXPECT_EQ(y[j + 16], (15 - j - 8) * 2.0f) << j;   // high nibbles: last 16
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
      ASSERT_EQ(y[32 * s + l], static_cast<float>(sc[s] * ((s + l) % 16)) - 0.5f * mn[s]) << "sub-block " << s << " l " << l;
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
      block[128 + 32 * h + l] = static_cast<uint8_t>((q1 >> 4) | ((q2 >> 4) << 2) | ((q3 >> 4) << 4) | ((q4 >> 4) << 6));
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

}  // namespace
