// headscope gradients benchmark (docs/gradients.md): attribution patching of every head and every
// head-to-head edge of a decoder for one IOI pair of T tokens (denoising, logit difference),
// against exact patching of the heads in the same run and against the compute floor: the matrix
// FLOPs the estimate needs at this machine's measured sgemm peak on the same threads —
//   the clean and corrupted forward passes (every linear layer, the causal scores and weighted
//   sums, one row's unembedding), the backward pass (∂x of every linear layer: as many FLOPs as its
//   forward; the attention's four products; the unembedding row), the receivers (each head's q, k,
//   v columns back through W_qkv: one more W_qkv product), each sender's write Δo_h W_O,hᵀ, and the
//   edge scores (senders × receivers dot products over T · d_model).
// At these lengths the base prompt's activations are kept for the backward and the source prompt
// runs in the same forward pass (Model::gradients' companion); a text too long for that keeps
// each layer's input and recomputes the layer (checkpointing), a pass the floor does not count.
// Prints one JSON line.
//   grad_bench MODEL [T=20] [THREADS=2] [REPEATS=3] [EXACT_REPEATS=REPEATS]
#include <omp.h>

#include <cstdio>
#include <cstdlib>
#include <string>

#include "headscope/circuits.h"
#include "headscope/headscope.h"
#include "timing.h"

using namespace headscope;

static double forward_gflop(const ModelConfig& c, int64_t T) {
  const double D = c.d_model, F = c.d_ff, Q = double(c.n_head) * c.d_head, KV = double(c.n_kv_head) * c.d_head;
  const double linear = 2.0 * T * D * (Q + 2 * KV + Q + 3 * F);
  const double attention = 2.0 * 2.0 * c.n_head * c.d_head * (T * (T + 1) / 2.0);
  return ((linear + attention) * c.n_layer + 2.0 * D * c.vocab_size) / 1e9;
}

static double backward_gflop(const ModelConfig& c, int64_t T, bool edges) {
  const double D = c.d_model, F = c.d_ff, Q = double(c.n_head) * c.d_head, KV = double(c.n_kv_head) * c.d_head;
  const double linear = 2.0 * T * D * (Q + 2 * KV + Q + 3 * F);
  const double attention = 4.0 * 2.0 * c.n_head * c.d_head * (T * (T + 1) / 2.0);
  double g = (linear + attention) * c.n_layer + 2.0 * D * c.vocab_size;
  if (edges) {
    const double slots = c.n_head + 2.0 * c.n_kv_head, L = c.n_layer;
    g += 2.0 * T * D * (Q + 2 * KV) * L;         // receivers
    g += 2.0 * T * c.d_head * D * c.n_head * L;  // Δo_h W_O,hᵀ
    // edge scores: each sender of layer lu against the receivers of the L − 1 − lu later layers and
    // the logits, T·D products each: Σ_lu H · (slots · (L − 1 − lu) + 1) · 2·T·D.
    g += 2.0 * c.n_head * T * D * (slots * L * (L - 1) / 2 + L);
  }
  return g / 1e9;
}

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: grad_bench MODEL [T=20] [THREADS=2] [REPEATS=3] [EXACT_REPEATS=REPEATS]\n");
    return 1;
  }
  const auto arg = [&](int i, int fallback) { return argc > i ? std::atoi(argv[i]) : fallback; };
  const int64_t T = arg(2, 20);
  const int threads = arg(3, 2), repeats = arg(4, 3), exact_repeats = arg(5, repeats);
  omp_set_num_threads(threads);
  const auto model = Model::load(argv[1]);
  const ModelConfig& c = model->config();
  PromptPairs all = make_ioi_pairs(*model, 400, 0), one{"ioi", 0, c.name, {}};
  for (const PromptPair& p : all.pairs)
    if (p.n_tokens == T && one.pairs.empty()) one.pairs.push_back(p);
  if (one.pairs.empty()) {
    std::fprintf(stderr, "no IOI pair of %lld tokens among 400 for this model\n", static_cast<long long>(T));
    return 1;
  }
  AttributionRequest heads, edges;
  edges.edges = true;
  AttributionReport with_edges;
  PatchReport exact;
  const std::vector<double> exact_ms =
      bench::sorted_times_ms(exact_repeats, [&] { exact = patch_sweep(*model, one, PatchRequest{}); });
  const std::vector<double> heads_ms =
      bench::sorted_times_ms(repeats, [&] { (void)attribution_patch(*model, one, heads); });
  const std::vector<double> edges_ms =
      bench::sorted_times_ms(repeats, [&] { with_edges = attribution_patch(*model, one, edges); });
  const double peak = bench::sgemm_peak_gflops();
  const double heads_gflop = 2 * forward_gflop(c, T) + backward_gflop(c, T, false);
  const double edges_gflop = 2 * forward_gflop(c, T) + backward_gflop(c, T, true);
  const double e = bench::median(exact_ms) / 1e3, h = bench::median(heads_ms) / 1e3, g = bench::median(edges_ms) / 1e3;
  std::printf(
      "{\"model\": \"%s\", \"T\": %lld, \"threads\": %d, \"exact_heads_s\": %.3f, \"attribution_heads_s\": %.3f, "
      "\"attribution_heads_edges_s\": %.3f, \"edges\": %zu, \"speedup_heads\": %.1f, \"speedup_heads_edges\": %.1f, "
      "\"peak_gflops\": %.1f, \"floor_heads_s\": %.4f, \"floor_heads_edges_s\": %.4f, \"ratio_heads\": %.2f, "
      "\"ratio_heads_edges\": %.2f, \"prompt\": \"%s\"}\n",
      c.name.c_str(), static_cast<long long>(T), threads, e, h, g, with_edges.edges.size(), e / h, e / g, peak,
      heads_gflop / peak, edges_gflop / peak, h / (heads_gflop / peak), g / (edges_gflop / peak),
      one.pairs[0].clean.c_str());
  return 0;
}
