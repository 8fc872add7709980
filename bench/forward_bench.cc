// headscope forward-pass benchmark: one model, sequences of T tokens, every head's attention
// (and head outputs, contributions, hidden states) captured, at a given thread count.
// Prints one JSON line per T: {"T":…, "threads":…, "median_ms":…, "min_ms":…, "gflop":…}.
// Also measures this machine's fp32 GEMM peak (--peak) so that bench/run.py can compare each
// time with the compute floor. Run through bench/run.py, which times transformers beside it.
#include <omp.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "headscope/headscope.h"
#include "ops/matmul.h"
#include "timing.h"

// Matrix-multiply FLOPs of one encoder forward pass (what the compute floor counts).
static double forward_gflop(const headscope::ModelConfig& c, int64_t T) {
  const double D = c.d_model, F = c.d_ff;
  const double per_layer = 2.0 * T * D * 3 * D     // Q, K, V projections
                           + 2.0 * 2 * T * T * D   // Q·Kᵀ and P·V over all heads
                           + 2.0 * T * D * D       // W_O
                           + 2.0 * 2 * T * D * F;  // feed-forward up and down
  return per_layer * c.n_layer / 1e9;
}

static void measure_peak(int threads) {
  omp_set_num_threads(threads);
  std::printf("{\"peak_gflops\": %.1f, \"threads\": %d}\n", headscope::bench::sgemm_peak_gflops(), threads);
}

int main(int argc, char** argv) {
  if (argc < 3 || (argc < 4 && std::string(argv[1]) != "--peak")) {
    std::fprintf(stderr,
                 "usage: forward_bench MODEL_DIR THREADS T [T …] [--repeats N] | forward_bench --peak THREADS\n");
    return 1;
  }
  if (std::string(argv[1]) == "--peak") {
    measure_peak(std::atoi(argv[2]));
    return 0;
  }
  try {
    const int threads = std::atoi(argv[2]);
    omp_set_num_threads(threads);
    auto model = headscope::Model::load(argv[1]);
    int repeats = 10;
    // "all": everything headscope records (attention, head outputs, W_O contributions, hidden
    // states); "reference": what transformers returns with output_attentions and
    // output_hidden_states (attention and hidden states), for a like-for-like comparison.
    headscope::CaptureOptions options;
    std::vector<int64_t> lengths;
    for (int i = 3; i < argc; ++i) {
      if (std::string(argv[i]) == "--repeats" && i + 1 < argc)
        repeats = std::atoi(argv[++i]);
      else if (std::string(argv[i]) == "--capture" && i + 1 < argc) {
        const std::string what = argv[++i];
        options.head_outputs = options.contributions = what == "all";
      } else
        lengths.push_back(std::atoll(argv[i]));
    }
    // Real text, long enough for 512 tokens; cut to exactly T tokens ([CLS] … [SEP] kept).
    std::string text;
    while (text.size() < 8000)
      text +=
          "Attention heads in a trained transformer specialise: some look at the previous word, others "
          "at the verb of a sentence, others at punctuation or at the first token. ";
    const headscope::Encoding full = model->encode(text, /*truncate=*/true);
    for (int64_t T : lengths) {
      headscope::Encoding enc;
      enc.tokens.assign(full.tokens.begin(), full.tokens.begin() + (T - 1));
      enc.tokens.push_back(full.tokens.back());
      const std::vector<double> times = headscope::bench::sorted_times_ms(repeats, [&] { model->run(enc, options); });
      std::printf("{\"T\": %lld, \"threads\": %d, \"median_ms\": %.3f, \"min_ms\": %.3f, \"gflop\": %.4f}\n",
                  static_cast<long long>(T), threads, headscope::bench::median(times), times[0],
                  forward_gflop(model->config(), T));
      std::fflush(stdout);
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "forward_bench: %s\n", e.what());
    return 2;
  }
  return 0;
}
