// Corpus throughput: N sentences of a treebank analysed (statistics, roles, links on the text) one
// text at a time — analyse() in a loop, what every corpus job did before packed passes — and as a
// corpus job (analyse_corpus: texts packed into passes of --batch-tokens), in the same process.
// Also the floor: the forward passes' GEMM FLOPs (2 · tokens · the linear layers' weights, plus
// the attention's 4 · T² · d_model per layer) at the sgemm peak measured in the same run.
//
//   corpus_bench MODEL TREEBANK.conllu [N=2000] [THREADS=2] [BATCH_TOKENS=2048]
//
// Prints one line per way, and a JSON line for docs/performance.md.
#include <omp.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "headscope/headscope.h"
#include "headscope/pipeline.h"
#include "timing.h"

using namespace headscope;

namespace {

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

// The GEMM FLOPs of one forward pass over T tokens: the linear layers (Q, K, V, O, the
// feed-forward block) and the attention's two products; the embeddings and norms are left out.
double pass_flops(const ModelConfig& c, int64_t T) {
  const double D = c.d_model, F = c.d_ff, Q = double(c.n_head) * c.d_head, KV = double(c.n_kv_head) * c.d_head;
  const double ffn = c.causal ? 3 * D * F : 2 * D * F;  // gated (gate, up, down) or up and down
  const double weights = D * (Q + 2 * KV) + Q * D + ffn;
  return c.n_layer * (2.0 * T * weights + 4.0 * double(T) * T * Q);
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 3) {
    std::fprintf(stderr, "usage: corpus_bench MODEL TREEBANK.conllu [N=2000] [THREADS=2] [BATCH_TOKENS=2048]\n");
    return 2;
  }
  const size_t n = argc > 3 ? size_t(std::atol(argv[3])) : 2000;
  const int threads = argc > 4 ? std::atoi(argv[4]) : 2;
  const int64_t batch_tokens = argc > 5 ? std::atol(argv[5]) : 2048;
  omp_set_num_threads(threads);
  const auto model = Model::load(argv[1]);
  const ModelConfig& c = model->config();
  std::vector<CorpusText> texts = read_corpus(argv[2]);
  if (texts.size() > n) texts.resize(n);
  const double peak = bench::sgemm_peak_gflops();

  AnalyseOptions dense;
  dense.capture = CaptureOptions::attention_only();
  dense.maps = AnalyseOptions::Maps::kDense;
  double flops = 0;
  int64_t tokens = 0;
  auto t0 = std::chrono::steady_clock::now();
  for (const CorpusText& t : texts) {  // the one-text loop
    Encoding e = model->encode(t.text, true);
    tokens += int64_t(e.size());
    flops += pass_flops(c, int64_t(e.size()));
    const RunAnalysis run = analyse(*model, t.text, std::move(e), {}, dense);
  }
  const double loop = seconds_since(t0);

  CorpusOptions o;
  o.batch_tokens = batch_tokens;
  o.truncate = true;
  t0 = std::chrono::steady_clock::now();
  const CorpusSummary s = analyse_corpus(*model, texts, {}, o, nullptr);
  const double packed = seconds_since(t0);
  const double floor = flops / (peak * 1e9);

  // The forward passes alone (attention captured, nothing analysed), one text at a time and
  // packed as the job packs them: what packing itself gains, apart from the per-text analysis.
  const CaptureOptions attention = CaptureOptions::attention_only();
  std::vector<Encoding> encodings;
  for (const CorpusText& t : texts) encodings.push_back(model->encode(t.text, true));
  t0 = std::chrono::steady_clock::now();
  for (const Encoding& e : encodings) (void)model->run(e, attention);
  const double loop_forward = seconds_since(t0);
  t0 = std::chrono::steady_clock::now();
  for (size_t first = 0; first < encodings.size();) {
    size_t end = first;
    int64_t rows = 0;
    while (end < encodings.size() && (end == first || rows + int64_t(encodings[end].size()) <= batch_tokens))
      rows += int64_t(encodings[end++].size());
    (void)model->run_batch(std::span<const Encoding>(encodings).subspan(first, end - first), {&attention, 1});
    first = end;
  }
  const double packed_forward = seconds_since(t0);
  std::printf("%s: %zu texts, %lld tokens, %d threads, sgemm peak %.1f GFLOP/s, forward floor %.2f s\n", c.name.c_str(),
              texts.size(), static_cast<long long>(tokens), threads, peak, floor);
  std::printf("  one text at a time: %.2f s, %.1f texts/s (%.1fx the floor)\n", loop, double(texts.size()) / loop,
              loop / floor);
  std::printf("  packed (%lld tokens a pass): %.2f s, %.1f texts/s (%.1fx the floor), %.2fx the loop; %lld failed\n",
              static_cast<long long>(batch_tokens), packed, double(texts.size()) / packed, packed / floor,
              loop / packed, static_cast<long long>(s.progress.failed));
  std::printf(
      "  forward passes alone: one at a time %.2f s (%.1fx the floor), packed %.2f s (%.1fx), %.2fx;"
      " so the analysis takes about %.2f s (loop) and %.2f s (packed)\n",
      loop_forward, loop_forward / floor, packed_forward, packed_forward / floor, loop_forward / packed_forward,
      loop - loop_forward, packed - packed_forward);
  std::printf(
      "{\"model\":\"%s\",\"texts\":%zu,\"tokens\":%lld,\"threads\":%d,\"peak_gflops\":%.1f,\"floor_s\":%.3f,"
      "\"loop_s\":%.3f,\"packed_s\":%.3f,\"loop_forward_s\":%.3f,\"packed_forward_s\":%.3f,\"batch_tokens\":%lld}\n",
      c.name.c_str(), texts.size(), static_cast<long long>(tokens), threads, peak, floor, loop, packed, loop_forward,
      packed_forward, static_cast<long long>(batch_tokens));
  return 0;
}
