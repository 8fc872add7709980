// headscope ablation measurement (issue 16, docs/causal.md): on a causal model, over repeated
// random token sequences (the induction probe), ablating the K heads the probe scores highest for
// induction against ablating K random heads, many draws. Prints one JSON line: the mean next-token
// loss on the second copy before, the rise with the induction heads zeroed, and the rise with
// random heads (mean and standard deviation over the draws).
//   ablate_induction_bench MODEL [K=6] [DRAWS=10] [SEQUENCES=8] [LENGTH=40] [THREADS=2]
#include <omp.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "headscope/headscope.h"
#include "headscope/pipeline.h"
#include "pipeline/probe.h"

using namespace headscope;

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: ablate_induction_bench MODEL [K] [DRAWS] [SEQUENCES] [LENGTH] [THREADS]\n");
    return 1;
  }
  const auto arg = [&](int i, int fallback) { return argc > i ? std::atoi(argv[i]) : fallback; };
  const int K = arg(2, 6), draws = arg(3, 10), sequences = arg(4, 8), length = arg(5, 40);
  omp_set_num_threads(arg(6, 2));
  const auto t0 = std::chrono::steady_clock::now();
  const auto model = Model::load(argv[1]);
  const ModelConfig& c = model->config();
  const int H = c.n_head, N = c.n_layer * H;

  // The heads headscope labels induction: the top K by the probe's induction score.
  const std::vector<analysis::ProbeEvidence> evidence = probe(*model, {length, 4, 1234});
  std::vector<int> order(static_cast<size_t>(N));
  std::iota(order.begin(), order.end(), 0);
  std::sort(order.begin(), order.end(),
            [&](int a, int b) { return evidence[size_t(a)].induction > evidence[size_t(b)].induction; });
  std::vector<HeadRef> induction;
  for (int i = 0; i < K; ++i) induction.push_back({order[size_t(i)] / H, order[size_t(i)] % H});

  // Fresh sequences (other seeds than the probe's) and the loss on their second copy: positions
  // t = P + L .. P + 2L − 2 predict the second copy's tokens 2 .. L, which induction can copy.
  std::vector<Encoding> texts;
  int P = 0;
  for (int s = 0; s < sequences; ++s) {
    const analysis::ProbeLayout layout = make_repeated_probe(model->tokenizer(), length, uint32_t(9000 + s));
    texts.push_back(layout.encoding);
    P = layout.prefix;
  }
  const Ablator ablator(*model, texts, {});
  const auto second_copy = [&](const AblationResult& r, bool after) {
    double sum = 0;
    int n = 0;
    for (const TextEffect& e : r.texts)
      for (int t = P + length; t <= P + 2 * length - 2; ++t, ++n)
        sum += after ? e.loss_after[size_t(t)] : e.loss_before[size_t(t)];
    return sum / n;
  };
  const AblationResult ind = ablator.ablate(induction);
  const double before = second_copy(ind, false), rise_induction = second_copy(ind, true) - before;
  std::mt19937 rng(42);
  std::vector<double> rises;
  for (int d = 0; d < draws; ++d) {
    std::shuffle(order.begin(), order.end(), rng);
    std::vector<HeadRef> random;
    for (int i = 0; i < K; ++i) random.push_back({order[size_t(i)] / H, order[size_t(i)] % H});
    rises.push_back(second_copy(ablator.ablate(random), true) - before);
  }
  const double mean = std::accumulate(rises.begin(), rises.end(), 0.0) / draws;
  double var = 0;
  for (double r : rises) var += (r - mean) * (r - mean);
  const double sd = draws > 1 ? std::sqrt(var / (draws - 1)) : 0.0;
  std::string heads;
  for (const HeadRef& h : induction)
    heads += (heads.empty() ? "" : ",") + std::to_string(h.layer) + "." + std::to_string(h.head);
  std::printf(
      "{\"model\": \"%s\", \"K\": %d, \"sequences\": %d, \"length\": %d, \"induction_heads\": \"%s\", "
      "\"second_copy_loss\": %.4f, \"rise_induction\": %.4f, \"rise_random_mean\": %.4f, "
      "\"rise_random_sd\": %.4f, \"draws\": %d, \"seconds\": %.1f}\n",
      c.name.c_str(), K, sequences, length, heads.c_str(), before, rise_induction, mean, sd, draws,
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
}
