// ops::quant_linear (weights kept as GGUF blocks, dequantised panel by panel inside the product,
// or row by row in a GEMV for a few rows of x) beside its slow twin (the whole matrix dequantised,
// then one sgemm), for every type the dequantisers know, on random blocks (quant_blocks.h), with row
// counts that leave a ragged last panel; and QuantMatrix::dequantize_cols against whole rows.
#include "ops/quant_linear.h"

#include <gtest/gtest.h>
#include <omp.h>

#include <cmath>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "kernel_paths.h"
#include "ops/quant_gemv.h"
#include "ops/reference/quant_linear.h"
#include "quant_blocks.h"
#include "test_support.h"

using headscope::Error;
using headscope::QuantMatrix;
using headscope::Tensor;
using headscope::io::GgmlType;
using headscope::testing::random_blocks;
using headscope::testing::random_vector;
namespace io = headscope::io;

namespace {

struct Compared {
  double max_abs = 0, max_rel = 0;  // rel: against Σ|x||w| of the output element
  bool bit_equal = true;
};

Compared compare(const QuantMatrix& W, int64_t T, bool with_bias, unsigned seed) {
  const int64_t in = W.cols(), out = W.rows();
  const std::vector<float> x = random_vector(size_t(T * in), seed), b = random_vector(size_t(out), seed + 1);
  std::vector<float> fast(size_t(T * out)), slow(size_t(T * out));
  headscope::ops::quant_linear(x.data(), T, W, with_bias ? b.data() : nullptr, fast.data());
  headscope::ops::reference::quant_linear(x.data(), T, W, with_bias ? b.data() : nullptr, slow.data());
  const Tensor w = W.to_f32();
  Compared c;
  for (int64_t t = 0; t < T; ++t)
    for (int64_t o = 0; o < out; ++o) {
      double magnitude = with_bias ? std::fabs(b[size_t(o)]) : 0.0;
      for (int64_t k = 0; k < in; ++k) magnitude += std::fabs(double(x[size_t(t * in + k)]) * w.ptr()[o * in + k]);
      const double d = std::fabs(double(fast[size_t(t * out + o)]) - slow[size_t(t * out + o)]);
      c.max_abs = std::max(c.max_abs, d);
      c.max_rel = std::max(c.max_rel, d / std::max(magnitude, 1e-30));
      c.bit_equal = c.bit_equal && fast[size_t(t * out + o)] == slow[size_t(t * out + o)];
    }
  return c;
}

// The panel path multiplies the same fp32 weights with the same sgemm as the twin: they agree to
// sgemm's rounding. The GEMV (T ≤ kGemvMaxRows) sums each row in its own order (8 lanes, then
// across): a float sum of n terms may differ by ~n · 2⁻²⁴ of Σ|x·w| in the worst case; 1e-5 is
// that for 512 columns with room to spare, and far below the gap between two quantisations.
double bound(int64_t T) { return T <= headscope::ops::kGemvMaxRows ? 1e-5 : 1e-6; }

const GgmlType kTypes[] = {GgmlType::F16,  GgmlType::BF16, GgmlType::Q4_0, GgmlType::Q4_1,
                           GgmlType::Q5_0, GgmlType::Q5_1, GgmlType::Q8_0, GgmlType::Q2_K,
                           GgmlType::Q3_K, GgmlType::Q4_K, GgmlType::Q5_K, GgmlType::Q6_K};

TEST(QuantLinear, EveryTypeAgreesWithDequantizeThenMultiply) {
  // 2 full panels and a ragged one of 7 rows; two blocks of 256 (or eight of 32) per row.
  const int64_t rows = 2 * headscope::ops::kQuantPanelRows + 7, cols = 512;
  double worst = 0;
  for (GgmlType type : kTypes) {
    const std::vector<uint8_t> bytes = random_blocks(type, rows, cols, unsigned(type) + 10);
    const QuantMatrix W = QuantMatrix::stored(type, rows, cols, bytes.data(), nullptr);
    ASSERT_TRUE(W.stored());
    EXPECT_EQ(W.bytes(), bytes.size());
    for (int64_t T : {1, 2, 3, 4, 5, 33}) {
      const Compared c = compare(W, T, /*with_bias=*/T % 2 == 1, unsigned(T));
      EXPECT_LE(c.max_rel, bound(T)) << io::ggml_type_name(type) << " T = " << T << " max |Δ| " << c.max_abs;
      worst = std::max(worst, c.max_rel);
      if (!c.bit_equal)
        std::printf("%s T=%lld: not bit-equal, max |Δ| %.3g\n", io::ggml_type_name(type), (long long)T, c.max_abs);
    }
  }
  std::printf("largest relative difference over all types: %.3g\n", worst);
}

TEST(QuantLinear, FusedRowsOfDifferentTypesAndRowBlocks) {
  // Q | K | V as a Q4_K, a Q6_K and an F16 matrix of 256 columns joined by rows (a Q4_K_M file
  // stores V as Q6_K); a row block that crosses both joins reads the same rows.
  const int64_t cols = 256;
  const auto q = random_blocks(GgmlType::Q4_K, 70, cols, 1), k = random_blocks(GgmlType::Q6_K, 9, cols, 2),
             v = random_blocks(GgmlType::F16, 9, cols, 3);
  const QuantMatrix Wq = QuantMatrix::stored(GgmlType::Q4_K, 70, cols, q.data(), nullptr),
                    Wk = QuantMatrix::stored(GgmlType::Q6_K, 9, cols, k.data(), nullptr),
                    Wv = QuantMatrix::stored(GgmlType::F16, 9, cols, v.data(), nullptr);
  const QuantMatrix W = QuantMatrix::concat_rows({&Wq, &Wk, &Wv});
  ASSERT_EQ(W.rows(), 88);
  EXPECT_EQ(W.type_names(), "Q4_K+Q6_K+F16");
  EXPECT_EQ(W.bytes(), q.size() + k.size() + v.size());
  // Row 75 of the fused matrix is row 5 of K, dequantised on its own.
  std::vector<float> row(cols), expected(cols);
  W.dequantize_rows(75, 1, row.data());
  io::dequantize_row(GgmlType::Q6_K, k.data() + 5 * io::ggml_type_size(GgmlType::Q6_K), expected.data(), cols);
  EXPECT_EQ(row, expected);
  EXPECT_LE(compare(W, 17, true, 7).max_rel, 1e-6);
  EXPECT_LE(compare(W, 1, true, 9).max_rel, bound(1));  // the GEMV across the joins
  const QuantMatrix middle = W.row_block(65, 20);       // 5 rows of Q, all of K, 6 of V
  const Tensor whole = W.to_f32(), part = middle.to_f32();
  ASSERT_EQ(part.shape, (std::vector<int64_t>{20, cols}));
  for (int64_t i = 0; i < 20 * cols; ++i) ASSERT_EQ(part.ptr()[i], whole.ptr()[65 * cols + i]) << i;
  EXPECT_LE(compare(middle, 3, false, 8).max_rel, 1e-6);
}

// dequantize_cols (a head's columns of a stored W_O) against the same columns of to_f32(), which
// dequantises whole rows: equal bit for bit, for ranges that are whole 32-value blocks, parts of
// one 256-value block, ranges across block edges and the whole row, written at a row stride
// wider than the range; also across the joins of a fused matrix and for an fp32 matrix.
void expect_columns_equal_slices(const QuantMatrix& W, const std::string& what) {
  const Tensor whole = W.to_f32();
  const int64_t rows = W.rows(), cols = W.cols();
  const std::pair<int64_t, int64_t> ranges[] = {{0, 64},   {64, 64}, {128, 128}, {192, 128},    {448, 64},
                                                {0, cols}, {40, 3},  {250, 12},  {cols - 1, 1}, {7, 0}};
  for (const auto& [c0, n] : ranges) {
    const int64_t ld = n + 5;
    std::vector<float> got(size_t(rows * ld), -1.0f);
    W.dequantize_cols(c0, n, got.data(), ld);
    for (int64_t r = 0; r < rows; ++r) {
      for (int64_t c = 0; c < n; ++c)
        ASSERT_EQ(got[size_t(r * ld + c)], whole.ptr()[r * cols + c0 + c])
            << what << " columns " << c0 << " + " << n << ", row " << r << ", column " << c;
      for (int64_t c = n; c < ld; ++c) ASSERT_EQ(got[size_t(r * ld + c)], -1.0f) << what << ": wrote past the range";
    }
  }
}

TEST(QuantMatrixColumns, EveryTypeGivesTheColumnsOfTheWholeRows) {
  const int64_t rows = 5, cols = 512;
  for (GgmlType type : kTypes) {
    const std::vector<uint8_t> bytes = random_blocks(type, rows, cols, unsigned(type) + 60);
    expect_columns_equal_slices(QuantMatrix::stored(type, rows, cols, bytes.data(), nullptr), io::ggml_type_name(type));
  }
  const auto q = random_blocks(GgmlType::Q4_K, 3, cols, 61), k = random_blocks(GgmlType::Q6_K, 2, cols, 62),
             v = random_blocks(GgmlType::Q8_0, 2, cols, 63);
  const QuantMatrix Wq = QuantMatrix::stored(GgmlType::Q4_K, 3, cols, q.data(), nullptr),
                    Wk = QuantMatrix::stored(GgmlType::Q6_K, 2, cols, k.data(), nullptr),
                    Wv = QuantMatrix::stored(GgmlType::Q8_0, 2, cols, v.data(), nullptr);
  expect_columns_equal_slices(QuantMatrix::concat_rows({&Wq, &Wk, &Wv}), "Q4_K+Q6_K+Q8_0");
  Tensor w({rows, cols});
  const std::vector<float> values = random_vector(size_t(rows * cols), 64);
  std::copy(values.begin(), values.end(), w.ptr());
  const QuantMatrix fp32(w);
  ASSERT_FALSE(fp32.stored());
  expect_columns_equal_slices(fp32, "F32");
}

TEST(QuantMatrixColumns, RangesOutsideTheMatrixAreRefused) {
  const uint8_t bytes[68] = {};
  const QuantMatrix W = QuantMatrix::stored(GgmlType::Q8_0, 2, 32, bytes, nullptr);
  std::vector<float> out(64);
  headscope::testing::expect_error([&] { W.dequantize_cols(30, 4, out.data(), 4); },
                                   {"columns 30 .. 34 of a 32-column matrix"});
  headscope::testing::expect_error([&] { W.dequantize_cols(0, 8, out.data(), 4); }, {"rows of 4"});
}

TEST(QuantLinear, GemvSplitAcrossThreadsAgreesWithTheTwin) {
  // 2,051 × 512 Q4_1 and Q4_K weights are more than kGemvMinParallelWeights, so the rows are split
  // across the threads (two chunks of different length: 2,051 is odd); the ragged end row and the
  // seam between chunks must match the twin like any other.
  const int64_t rows = 2051, cols = 512;
  static_assert(rows * cols >= headscope::ops::kGemvMinParallelWeights);
  for (GgmlType type : {GgmlType::Q4_1, GgmlType::Q4_K}) {
    const std::vector<uint8_t> bytes = random_blocks(type, rows, cols, 21);
    const QuantMatrix W = QuantMatrix::stored(type, rows, cols, bytes.data(), nullptr);
    for (int64_t T : {1, 4}) EXPECT_LE(compare(W, T, true, 22).max_rel, bound(T)) << io::ggml_type_name(type);
  }
}

TEST(QuantLinear, PanelsSplitAcrossThreadsAgreeWithTheTwin) {
  // A prefill's panels are sized so that every thread gets as many: 576 rows on 1, 2 and 3
  // threads are 3 × 192, 4 × 144 and 3 × 192 rows; 131 rows on 2 are 66 and 65; and 70 rows
  // of a matrix so wide that kQuantPanelBytes holds 32 of them are 3 × 24 on one thread (the
  // last 22), 4 × 18 on two (the last 16).
  // Every split must cover each row once and match the twin.
  const int saved = omp_get_max_threads();
  const int64_t wide = headscope::ops::kQuantPanelBytes / 4 / 32;  // at most 32 rows per panel
  for (auto [rows, cols] : {std::pair<int64_t, int64_t>{576, 256}, {131, 256}, {70, wide}}) {
    const std::vector<uint8_t> bytes = random_blocks(GgmlType::Q4_1, rows, cols, unsigned(rows));
    const QuantMatrix W = QuantMatrix::stored(GgmlType::Q4_1, rows, cols, bytes.data(), nullptr);
    for (int threads : {1, 2, 3}) {
      omp_set_num_threads(threads);
      EXPECT_LE(compare(W, 33, true, 5).max_rel, bound(33)) << rows << " rows on " << threads << " threads";
    }
  }
  omp_set_num_threads(saved);
}

TEST(QuantLinear, GemvRefusesMoreRowsThanItKeepsInRegisters) {
  const uint8_t bytes[64] = {};
  const QuantMatrix W = QuantMatrix::stored(GgmlType::Q8_0, 2, 32, bytes, nullptr);
  std::vector<float> x(32 * 5), y(2 * 5);
  headscope::testing::expect_error([&] { headscope::ops::quant_gemv(x.data(), 5, W, nullptr, y.data()); },
                                   {"quant_gemv", "5 rows"});
}

TEST(QuantLinear, Fp32MatrixIsTheOrdinaryLinear) {
  Tensor w({5, 3});
  for (int64_t i = 0; i < 15; ++i) w.ptr()[i] = float(i);
  const QuantMatrix W(w);
  EXPECT_FALSE(W.stored());
  const float x[3] = {1, 2, 3};
  float y[5];
  headscope::ops::quant_linear(x, 1, W, nullptr, y);
  for (int o = 0; o < 5; ++o) EXPECT_EQ(y[o], float(3 * o) * 1 + float(3 * o + 1) * 2 + float(3 * o + 2) * 3);
}

TEST(QuantLinear, TypesWithoutADequantizerAndPartialBlocksAreRefused) {
  const uint8_t bytes[1024] = {};
  headscope::testing::expect_error([&] { QuantMatrix::stored(GgmlType::IQ2_XXS, 1, 256, bytes, nullptr); },
                                   {"IQ2_XXS"});
  headscope::testing::expect_error([&] { QuantMatrix::stored(GgmlType::Q4_0, 2, 40, bytes, nullptr); },
                                   {"Q4_0", "32-value blocks"});
  const QuantMatrix W = QuantMatrix::stored(GgmlType::Q8_0, 2, 32, bytes, nullptr);
  std::vector<float> out(96);
  headscope::testing::expect_error([&] { W.dequantize_rows(1, 2, out.data()); }, {"rows 1 .. 3 of a 2-row matrix"});
}

// The GEMV on each instruction-set path (portable, AVX2 + FMA, AVX-512F; a path this CPU cannot
// run is skipped) against the twin, for every type (those without a block kernel go through the
// path's fp32 dot), 1 to kGemvMaxRows rows of x, with and without bias, on one thread and split
// across threads.
class QuantGemvPath : public headscope::testing::KernelPathTest {};

TEST_P(QuantGemvPath, EveryTypeAgreesWithTheTwin) {
  const int64_t rows = 37, cols = 512;
  for (GgmlType type : kTypes) {
    const std::vector<uint8_t> bytes = random_blocks(type, rows, cols, unsigned(type) + 30);
    const QuantMatrix W = QuantMatrix::stored(type, rows, cols, bytes.data(), nullptr);
    for (int64_t T = 1; T <= headscope::ops::kGemvMaxRows; ++T) {
      const Compared c = compare(W, T, /*with_bias=*/T % 2 == 0, unsigned(T) + 40);
      EXPECT_LE(c.max_rel, bound(T)) << io::ggml_type_name(type) << " T = " << T << " max |Δ| " << c.max_abs;
    }
  }
  const int64_t big_rows = 2051;  // threaded: more than kGemvMinParallelWeights
  static_assert(big_rows * cols >= headscope::ops::kGemvMinParallelWeights);
  for (GgmlType type : {GgmlType::Q8_0, GgmlType::Q6_K}) {
    const std::vector<uint8_t> bytes = random_blocks(type, big_rows, cols, 50);
    const QuantMatrix W = QuantMatrix::stored(type, big_rows, cols, bytes.data(), nullptr);
    EXPECT_LE(compare(W, 3, true, 51).max_rel, bound(3)) << io::ggml_type_name(type);
  }
}

INSTANTIATE_KERNEL_PATHS(QuantGemvPath);

}  // namespace
