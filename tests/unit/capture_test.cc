// capture::Recorder on hand-built inputs: what allocate() sizes against capture_bytes(), where
// attention goes, the grouped-query Q/K copy out of a fused projection, and the per-head
// records of a W_O kept as a GGUF stores it.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <vector>

#include "capture/capture.h"
#include "quant_blocks.h"
#include "test_support.h"

namespace headscope::capture {
namespace {

ModelConfig tiny_gqa() {  // 2 layers, 4 query heads sharing 2 key/value heads, d_head 2
  ModelConfig c;
  c.n_layer = 2, c.n_head = 4, c.n_kv_head = 2, c.d_head = 2, c.d_model = 8, c.d_ff = 16;
  return c;
}

CaptureOptions everything() {
  CaptureOptions o;
  o.queries_keys = true;
  return o;
}

TEST(Capture, AllocatesTRowsOverTkKeysAsCounted) {
  const ModelConfig c = tiny_gqa();
  const Capture cap = allocate(c, 3, 5, everything(), {0, 0, 1, 1});
  EXPECT_EQ(cap.attention.shape, (std::vector<int64_t>{2, 4, 3, 5}));
  EXPECT_EQ(cap.queries.shape, (std::vector<int64_t>{2, 4, 3, 2}));
  EXPECT_EQ(cap.keys.shape, (std::vector<int64_t>{2, 2, 3, 2}));
  EXPECT_EQ(cap.hidden_states.shape, (std::vector<int64_t>{3, 3, 8}));
  const int64_t floats = cap.attention.numel() + cap.head_outputs.numel() + cap.contributions.numel() +
                         cap.attn_output.numel() + cap.hidden_states.numel() + cap.queries.numel() + cap.keys.numel();
  EXPECT_EQ(capture_bytes(c, 3, 5, everything()), uint64_t(floats) * 4);
  // 2·4·3·5 + 2·4·3·2 + 2·4·3·8 + 2·3·8 + 3·3·8 + 2·(4+2)·3·2, by hand:
  EXPECT_EQ(floats, 120 + 48 + 192 + 48 + 72 + 72);
}

TEST(Capture, AttentionIsTheCaptureOrOneScratch) {
  const ModelConfig c = tiny_gqa();
  Recorder with(c, 3, 5, everything(), {0, 0, 1, 1});
  std::vector<float*> calls;
  with.attention(1, true, [&](int64_t q0, int64_t q1, int64_t width, ops::ProbsOut probs) {
    EXPECT_EQ(q0, 0);
    EXPECT_EQ(q1, 3);
    EXPECT_EQ(width, 5);
    calls.push_back(probs.data);
  });
  const Capture cap = with.finish();
  ASSERT_EQ(calls.size(), 1u);
  EXPECT_EQ(calls[0], cap.attention.ptr() + 4 * 3 * 5);  // layer 1 of [L, H, T, Tk]

  CaptureOptions none = CaptureOptions::attention_only();
  none.attention = false;
  Recorder without(c, 3, 5, none, {0, 0, 1, 1});
  calls.clear();
  for (int l = 0; l < 2; ++l)
    without.attention(l, true, [&](int64_t, int64_t, int64_t, ops::ProbsOut probs) {
      probs.data[4 * 3 * 5 - 1] = 1.0f;  // it holds [H, T, Tk]
      calls.push_back(probs.data);
    });
  ASSERT_EQ(calls.size(), 2u);
  EXPECT_EQ(calls[0], calls[1]);  // one scratch, reused by every layer
  EXPECT_TRUE(without.finish().attention.empty());
}

TEST(Capture, StreamedAttentionArrivesInBlocksOfRows) {
  const ModelConfig c = tiny_gqa();
  CaptureOptions o = CaptureOptions::attention_only();
  o.attention = false;
  o.attention_block_rows = 2;
  struct Seen {
    int layer;
    int64_t q0, q1, width;
    float first;
  };
  std::vector<Seen> seen;
  o.attention_sink = [&](int layer, int64_t q0, int64_t q1, int64_t width, const float* probs) {
    seen.push_back({layer, q0, q1, width, probs[0]});
  };
  // 3 new rows after 2 cached tokens (positions 2, 3, 4), causal: blocks [2, 4) and [4, 5), each
  // as wide as the keys its last row sees.
  Recorder rec(c, 3, 5, o, {0, 0, 1, 1});
  for (bool causal : {true, false})
    rec.attention(causal ? 0 : 1, causal, [&](int64_t q0, int64_t q1, int64_t width, ops::ProbsOut probs) {
      probs.data[0] = float(100 * q0 + width);
      EXPECT_LE(q1 - q0, 2);
      EXPECT_GE(width, q1);
    });
  ASSERT_EQ(seen.size(), 4u);
  EXPECT_EQ(seen[0].layer, 0);
  EXPECT_EQ(seen[0].q0, 2);
  EXPECT_EQ(seen[0].q1, 4);
  EXPECT_EQ(seen[0].width, 4);
  EXPECT_EQ(seen[0].first, 4.0f);  // the block the computation wrote (rows of this pass from 0)
  EXPECT_EQ(seen[1].q0, 4);
  EXPECT_EQ(seen[1].q1, 5);
  EXPECT_EQ(seen[1].width, 5);
  EXPECT_EQ(seen[1].first, 205.0f);
  EXPECT_EQ(seen[2].layer, 1);
  EXPECT_EQ(seen[2].width, 5);  // bidirectional: every key
  EXPECT_EQ(seen[3].width, 5);
  EXPECT_TRUE(rec.finish().attention.empty());
  EXPECT_EQ(attention_scratch_bytes(c, 3, 5, o), uint64_t(4 * 2 * 5 * 4));  // [H, 2 rows, Tk]
}

TEST(Capture, RecordQkvSplitsHeadsOfAFusedProjection) {
  const ModelConfig c = tiny_gqa();
  CaptureOptions o = everything();
  o.values = true;
  Recorder rec(c, 2, 2, o, {0, 0, 1, 1});
  // Fused rows as the decoder holds them: Q (4 heads × 2) | K (2 heads × 2) | V, stride 16.
  // Element value = 100·t + column, so each copied number says where it came from.
  std::vector<float> qkv(2 * 16);
  for (int t = 0; t < 2; ++t)
    for (int j = 0; j < 16; ++j) qkv[size_t(t * 16 + j)] = float(100 * t + j);
  rec.record_qkv(1, qkv.data(), 16, qkv.data() + 8, 16, qkv.data() + 12, 16);
  const Capture cap = rec.finish();
  // queries[1, h=2, t=1, :] = columns 4, 5 of row 1; keys[1, g=1, t=0, :] = columns 10, 11 of row 0.
  const float* q = cap.queries.ptr() + ((1 * 4 + 2) * 2 + 1) * 2;
  EXPECT_EQ(q[0], 104.0f);
  EXPECT_EQ(q[1], 105.0f);
  const float* k = cap.keys.ptr() + ((1 * 2 + 1) * 2 + 0) * 2;
  EXPECT_EQ(k[0], 10.0f);
  EXPECT_EQ(k[1], 11.0f);
  // values[1, g=0, t=1, :] = columns 12, 13 of row 1.
  const float* v = cap.values.ptr() + ((1 * 2 + 0) * 2 + 1) * 2;
  EXPECT_EQ(v[0], 112.0f);
  EXPECT_EQ(v[1], 113.0f);
}

// W_O kept as stored (a decoder's from a quantized GGUF): the model's product, each head's
// contribution and each head's value norms equal what W_O dequantised whole (to_f32) gives, here
// summed in double by hand. Heads of 64 columns are two Q8_0 blocks each, and a quarter of one
// Q4_K block (256 values): dequantize_cols reads the covering block and keeps the head's part.
// The same recorder given the fp32 W_O records the same values. Under GQA (4 query heads, 2
// value heads) head h reads value head h / 2.
TEST(Capture, StoredOutputProjectionIsReadAHeadAtATime) {
  ModelConfig c;
  c.n_layer = 2, c.n_head = 4, c.n_kv_head = 2, c.d_head = 64, c.d_model = 24, c.d_ff = 8;
  const int64_t T = 3, H = 4, Dh = 64, D = 24, C = H * Dh, KV = 2 * Dh;
  const std::vector<int> kv_head_of = {0, 0, 1, 1};
  CaptureOptions o;
  o.contributions = true;
  o.value_norms = true;
  const std::vector<float> concat = testing::random_vector(size_t(T * C), 1),
                           v = testing::random_vector(size_t(T * KV), 2), bias = testing::random_vector(size_t(D), 3);
  for (io::GgmlType type : {io::GgmlType::Q8_0, io::GgmlType::Q4_K}) {
    const std::vector<uint8_t> blocks = testing::random_blocks(type, D, C, unsigned(type));
    const QuantMatrix stored = QuantMatrix::stored(type, D, C, blocks.data(), nullptr);
    const QuantMatrix fp32(stored.to_f32());
    const float* w = fp32.fp32().ptr();  // [D, C]
    Capture caps[2];
    std::vector<float> outs[2];
    for (int i = 0; i < 2; ++i) {
      const QuantMatrix& W_O = i == 0 ? stored : fp32;
      Recorder rec(c, T, T, o, kv_head_of);
      std::vector<float> in = concat;
      outs[i].resize(size_t(T * D));
      rec.record_value_norms(1, v.data(), KV, W_O);
      rec.project_heads(1, in.data(), W_O, bias.data(), outs[i].data());
      caps[i] = rec.finish();
    }
    const char* name = io::ggml_type_name(type);
    double worst = 0;  // relative to Σ|terms| of each sum
    for (int64_t t = 0; t < T; ++t)
      for (int64_t d = 0; d < D; ++d) {
        double out = bias[size_t(d)], out_mag = std::fabs(bias[size_t(d)]);
        for (int64_t h = 0; h < H; ++h) {
          double s = 0, mag = 0;
          for (int64_t j = h * Dh; j < (h + 1) * Dh; ++j) {
            s += double(concat[size_t(t * C + j)]) * w[d * C + j];
            mag += std::fabs(double(concat[size_t(t * C + j)]) * w[d * C + j]);
          }
          const float got = caps[0].contributions.ptr()[((1 * H + h) * T + t) * D + d];
          worst = std::max(worst, std::fabs(got - s) / mag);
          EXPECT_EQ(got, caps[1].contributions.ptr()[((1 * H + h) * T + t) * D + d]) << name << " head " << h;
          out += s;
          out_mag += mag;
        }
        worst = std::max(worst, std::fabs(outs[0][size_t(t * D + d)] - out) / out_mag);
      }
    for (int64_t h = 0; h < H; ++h)
      for (int64_t k = 0; k < T; ++k) {
        double sq = 0, mag_sq = 0;  // ‖f‖² and ‖Σ|terms| of each f_d‖²
        for (int64_t d = 0; d < D; ++d) {
          double f = 0, mag = 0;
          for (int64_t j = 0; j < Dh; ++j) {
            const double term = double(v[size_t(k * KV + kv_head_of[size_t(h)] * Dh + j)]) * w[d * C + h * Dh + j];
            f += term;
            mag += std::fabs(term);
          }
          sq += f * f;
          mag_sq += mag * mag;
        }
        const float got = caps[0].value_norms.ptr()[(1 * H + h) * T + k];
        worst = std::max(worst, std::fabs(got - std::sqrt(sq)) / std::sqrt(mag_sq));
        EXPECT_EQ(got, caps[1].value_norms.ptr()[(1 * H + h) * T + k]) << name << " head " << h;
      }
    std::printf("%s W_O kept as stored: largest relative difference from the sums in double %.3g\n", name, worst);
    EXPECT_LE(worst, 1e-6) << name;  // fp32 sums of 64 (contributions) to 256 (output) products
  }
}

}  // namespace
}  // namespace headscope::capture
