// headscope analyse benchmark: the pipeline call that `headscope run` and the Python package's
// Model.run make — encode, forward pass with every attention map, statistics and roles of every
// head — timed inside one process, so bench/python_overhead.py can set Python's wall time for the
// same call beside it. Prints one JSON line: {"T":…, "threads":…, "median_ms":…, "min_ms":…}.
#include <omp.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iterator>
#include <string>

#include "headscope/headscope.h"
#include "headscope/pipeline.h"
#include "timing.h"

int main(int argc, char** argv) {
  if (argc < 4) {
    std::fprintf(stderr, "usage: analyse_bench MODEL THREADS TEXT_FILE [REPEATS]\n");
    return 1;
  }
  try {
    omp_set_num_threads(std::atoi(argv[2]));
    const auto model = headscope::Model::load(argv[1]);
    std::ifstream in(argv[3], std::ios::binary);
    const std::string text(std::istreambuf_iterator<char>(in), {});
    const int repeats = argc > 4 ? std::atoi(argv[4]) : 20;
    // As Model.run(text, corpus=False) with its defaults: the probe measured once, attention only.
    const auto probe = headscope::probe(*model);
    headscope::AnalyseOptions options;
    options.capture = headscope::CaptureOptions::attention_only();
    size_t T = 0;
    const auto times = headscope::bench::sorted_times_ms(repeats, [&] {
      headscope::Encoding encoding = model->encode(text);
      T = encoding.size();
      const headscope::RunAnalysis run = headscope::analyse(*model, text, std::move(encoding), probe, options);
    });
    std::printf("{\"T\": %zu, \"threads\": %s, \"median_ms\": %.3f, \"min_ms\": %.3f}\n", T, argv[2],
                headscope::bench::median(times), times.front());
  } catch (const headscope::Error& e) {
    std::fprintf(stderr, "analyse_bench: %s\n", e.what());
    return 2;
  }
  return 0;
}
