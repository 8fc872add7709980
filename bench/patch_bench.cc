// headscope patching benchmark (docs/circuits.md): every head of a decoder patched alone
// (denoising, logit difference) for one IOI pair of T tokens, against the compute floor: the
// matrix FLOPs of every pass the sweep runs (the clean and corrupted runs, then one pass resumed
// from each head's layer) at this machine's measured sgemm peak on the same threads.
// Prints one JSON line.
//   patch_bench MODEL [T=20] [THREADS=2] [REPEATS=3]
#include <omp.h>

#include <cstdio>
#include <cstdlib>
#include <string>

#include "headscope/circuits.h"
#include "headscope/headscope.h"
#include "timing.h"

using namespace headscope;

// Matrix FLOPs of a causal pass over T tokens through layers first .. n_layer − 1, then the
// last row's logits: every linear layer (2·T·in·out), the scores and the weighted sum over the
// T(T+1)/2 query-key pairs a causal mask leaves, and the unembedding of one row.
static double pass_gflop(const ModelConfig& c, int64_t T, int first) {
  const double D = c.d_model, F = c.d_ff, Q = double(c.n_head) * c.d_head, KV = double(c.n_kv_head) * c.d_head;
  const double linear = 2.0 * T * D * (Q + 2 * KV + Q + 3 * F);  // Q, K, V, W_O, gate, up, down
  const double attention = 2.0 * 2.0 * c.n_head * c.d_head * (T * (T + 1) / 2.0);
  return ((linear + attention) * (c.n_layer - first) + 2.0 * D * c.vocab_size) / 1e9;
}

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: patch_bench MODEL [T=20] [THREADS=2] [REPEATS=3]\n");
    return 1;
  }
  const auto arg = [&](int i, int fallback) { return argc > i ? std::atoi(argv[i]) : fallback; };
  const int64_t T = arg(2, 20);
  const int threads = arg(3, 2), repeats = arg(4, 3);
  omp_set_num_threads(threads);
  const auto model = Model::load(argv[1]);
  const ModelConfig& c = model->config();
  // The first generated IOI pair of T tokens.
  PromptPairs all = make_ioi_pairs(*model, 400, 0), one{"ioi", 0, c.name, {}};
  for (const PromptPair& p : all.pairs)
    if (p.n_tokens == T && one.pairs.empty()) one.pairs.push_back(p);
  if (one.pairs.empty()) {
    std::fprintf(stderr, "no IOI pair of %lld tokens among 400 for this model\n", static_cast<long long>(T));
    return 1;
  }
  PatchReport report;
  const std::vector<double> ms =
      bench::sorted_times_ms(repeats, [&] { report = patch_sweep(*model, one, PatchRequest{}); });
  double gflop = 2 * pass_gflop(c, T, 0);  // the clean and corrupted runs
  for (const PatchEffect& e : report.effects) gflop += pass_gflop(c, T, e.layer);
  const double peak = bench::sgemm_peak_gflops();
  const double floor_s = gflop / peak, seconds = bench::median(ms) / 1e3;
  std::printf(
      "{\"model\": \"%s\", \"T\": %lld, \"threads\": %d, \"passes\": %lld, \"median_s\": %.3f, \"min_s\": %.3f, "
      "\"gflop\": %.1f, \"peak_gflops\": %.1f, \"floor_s\": %.3f, \"ratio_to_floor\": %.2f, \"clean\": %.4f, "
      "\"corrupt\": %.4f, \"prompt\": \"%s\"}\n",
      c.name.c_str(), static_cast<long long>(T), threads, static_cast<long long>(report.passes), seconds,
      ms.front() / 1e3, gflop, peak, floor_s, seconds / floor_s, report.clean, report.corrupt,
      one.pairs[0].clean.c_str());
  return 0;
}
