// headscope decoder benchmark: one causal model (e.g. models/SmolLM2-135M-Instruct), sequences of
// T tokens, at a given thread count. For each T prints one JSON line with the median time of
//   all      — every capture on (attention, head outputs, W_O contributions, hidden states)
//   same     — what transformers returns with output_attentions and output_hidden_states:
//              attention maps and hidden states
//   attention — attention maps only
//   step     — one generation step through the KV cache after T tokens (attention row captured)
// Run through bench/decoder_bench.py, which times transformers on the same model beside it.
#include <omp.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "headscope/headscope.h"
#include "timing.h"

using Clock = std::chrono::steady_clock;

static double ms_since(Clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
}

template <typename F>
static double median_ms(int repeats, F&& f) {
  return headscope::bench::median(headscope::bench::sorted_times_ms(repeats, f));
}

int main(int argc, char** argv) {
  // As the CLI does (tools/cli/common.h, use_passive_wait_policy): waiting OpenMP threads sleep
  // unless the user chose a policy; libgomp reads it before main, hence the re-exec.
  if (std::getenv("OMP_WAIT_POLICY") == nullptr && std::getenv("GOMP_SPINCOUNT") == nullptr &&
      setenv("OMP_WAIT_POLICY", "passive", 0) == 0)
    execv("/proc/self/exe", argv);
  if (argc < 4) {
    std::fprintf(stderr, "usage: decoder_bench MODEL THREADS T [T ...] [--repeats N]\n");
    return 1;
  }
  try {
    const int threads = std::atoi(argv[2]);
    omp_set_num_threads(threads);
    auto model = headscope::Model::load(argv[1]);
    int repeats = 5;
    std::vector<int64_t> lengths;
    for (int i = 3; i < argc; ++i) {
      if (std::string(argv[i]) == "--repeats" && i + 1 < argc) {
        repeats = std::atoi(argv[++i]);
      } else {
        lengths.push_back(std::atoll(argv[i]));
      }
    }
    std::string text;
    while (text.size() < 12000) {
      text +=
          "Attention heads in a trained transformer specialise: some look at the previous word, others "
          "at the verb of a sentence, others at punctuation or at the first token. ";
    }
    const std::vector<int32_t> all_ids = model->encode(text, true).ids();
    const headscope::CaptureOptions attention_only = headscope::CaptureOptions::attention_only();
    headscope::CaptureOptions same_outputs = attention_only;
    same_outputs.hidden_states = true;
    for (int64_t T : lengths) {
      if (T > static_cast<int64_t>(all_ids.size())) throw headscope::Error("text too short for T");
      const std::vector<int32_t> ids(all_ids.begin(), all_ids.begin() + T);
      const double all = median_ms(repeats, [&] {
        auto s = model->start();
        model->extend(*s, ids, {}, nullptr);
      });
      const double same = median_ms(repeats, [&] {
        auto s = model->start();
        model->extend(*s, ids, same_outputs, nullptr);
      });
      const double attn = median_ms(repeats, [&] {
        auto s = model->start();
        model->extend(*s, ids, attention_only, nullptr);
      });
      auto state = model->start();
      std::vector<float> logits;
      model->extend(*state, ids, attention_only, &logits);
      std::vector<double> steps;
      for (int r = 0; r < repeats + 1; ++r) {
        const auto t0 = Clock::now();
        model->extend(*state, {ids[size_t(r) % ids.size()]}, attention_only, &logits);
        if (r > 0) steps.push_back(ms_since(t0));
      }
      std::sort(steps.begin(), steps.end());
      std::printf(
          "{\"T\": %lld, \"threads\": %d, \"all_ms\": %.2f, \"same_ms\": %.2f, \"attention_ms\": %.2f, "
          "\"step_ms\": %.2f}\n",
          static_cast<long long>(T), threads, all, same, attn, steps[steps.size() / 2]);
      std::fflush(stdout);
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "decoder_bench: %s\n", e.what());
    return 2;
  }
  return 0;
}
