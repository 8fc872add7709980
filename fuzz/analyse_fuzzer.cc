// libFuzzer target: attention maps handed in from outside (the Python package's
// analyse_attention, "bring your own attention") → analyse_attention(). The input builds what the
// binding builds (python/src/core.cc analyse_attention_json): token strings joined by spaces as
// the text, special flags, causal forced or detected from the upper triangle, then the maps.
//
//   byte 0   bits 0-1 layers (0-3), bits 2-3 heads (0-3), bits 4-5 causal: 0 detected as the
//            binding does, 1 causal, 2 or 3 bidirectional; bit 6 without_specials; bit 7 the mode
//   byte 1   T, the tokens (0 .. limits::kMaxFuzzAnalyseTokens)
//   byte 2   overview_cells as a signed byte (0 and negatives are refused with Error)
//   T bytes  one per token: bits 0-3 its string (16 short ones, so duplicates happen), bit 7 special
//   rest     mode 0: raw float32 weights, repeated to fill [L, H, T, T] (NaN, Inf, negatives, rows
//            not summing to 1: Error expected); mode 1: one byte per weight, each row normalised
//            over the keys its query may see (the maps analysis runs on), a byte 0xFF poisoning
//            its weight with NaN, Inf, -0.5 or 2 (Error expected).
// Accepted maps must give a run of the asked shape; refused ones an Error, never a crash.
#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <string>

#include "fuzz_support.h"
#include "headscope/limits.h"
#include "headscope/pipeline.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace headscope;
  if (size < 3) return 0;
  const uint8_t flags = data[0];
  const int64_t L = flags & 3, H = (flags >> 2) & 3, T = std::min<int64_t>(data[1], limits::kMaxFuzzAnalyseTokens);
  const int causal_mode = (flags >> 4) & 3;
  const bool normalised = flags & 0x80;
  AnalyseOptions options;
  options.without_specials = flags & 0x40;
  options.overview_cells = int(int8_t(data[2]));
  data += 3;
  size -= 3;
  if (size_t(T) > size) return 0;

  static const char* const kStrings[16] = {"the", "cat", "sat", ",",   "the", "[CLS]", "é",  "東京",
                                           "it",  ".",   "",    "a b", "##s", "cat",   "\t", "!!"};
  std::string text;
  Encoding encoding;
  int32_t word = 0;
  for (int64_t i = 0; i < T; ++i) {
    Token t;
    t.text = kStrings[data[i] & 15];
    t.id = int32_t(data[i] & 15);
    t.special = data[i] & 0x80;
    if (!t.special) {
      if (!text.empty()) text += ' ';
      t.begin = int64_t(text.size());
      text += t.text;
      t.end = int64_t(text.size());
      t.word = word++;
    }
    encoding.tokens.push_back(std::move(t));
  }
  data += T;
  size -= size_t(T);

  Tensor maps({L, H, T, T});
  float* a = maps.ptr();
  const int64_t n = maps.numel();
  if (!normalised) {
    const size_t floats = size / sizeof(float);
    for (int64_t i = 0; i < n && floats > 0; ++i)
      std::memcpy(&a[i], data + (size_t(i) % floats) * sizeof(float), sizeof(float));
  } else if (size > 0) {
    const bool causal_rows = causal_mode == 1;
    static const float kPoison[4] = {std::numeric_limits<float>::quiet_NaN(), std::numeric_limits<float>::infinity(),
                                     -0.5f, 2.0f};
    for (int64_t row = 0; row < L * H * T; ++row) {
      const int64_t q = row % T;
      float* r = a + row * T;
      double total = 0;
      for (int64_t k = 0; k < T; ++k) {
        if (causal_rows && k > q) continue;
        r[k] = float(data[size_t(row * T + k) % size]);
        total += r[k];
      }
      for (int64_t k = 0; k < T; ++k) {
        if (causal_rows && k > q) continue;
        r[k] = total > 0 ? float(r[k] / total) : (k == 0 ? 1.0f : 0.0f);
      }
      for (int64_t k = 0; k < T; ++k)
        if (data[size_t(row * T + k) % size] == 0xFF && (row + k) % 7 == 3) r[k] = kPoison[(row + k) & 3];
    }
  }

  ModelConfig config;
  config.architecture = "external";
  config.name = "attention maps";
  config.n_layer = int(L);
  config.n_head = config.n_kv_head = int(H);
  config.max_positions = int(std::max<int64_t>(T, 1));
  config.vocab_size = 16;
  bool upper_zero = true;
  for (int64_t i = 0; i < L * H && upper_zero; ++i)
    for (int64_t q = 0; q < T && upper_zero; ++q)
      for (int64_t k = q + 1; k < T && upper_zero; ++k) upper_zero = a[(i * T + q) * T + k] == 0;
  config.causal = causal_mode == 0 ? (T > 1 && upper_zero) : causal_mode == 1;

  fuzz::expect_ok_or_error([&] {
    const RunAnalysis run = analyse_attention(config, text, encoding, std::move(maps), options);
    if (run.T() != T || run.capture.n_layer != L || run.capture.n_head != H) std::abort();
    if (run.token_level.roles.size() != size_t(L * H) || run.overviews.size() != size_t(L * H)) std::abort();
    (void)token_labels(run);
    (void)word_units(run);
  });
  return 0;
}
