// The linear layers of a forward pass alone: y = x · Wᵀ + b through ops::PackedLinear, for the
// shapes of a model (default: all-MiniLM-L6-v2 — d_model 384, d_ff 1536), at a given T and
// thread count. Prints GFLOP/s per shape: compare with `forward_bench --peak`.
//   linear_bench THREADS T [D F] [--repeats N]
#include <omp.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <string>
#include <vector>

#include "ops/packed_linear.h"
#include "timing.h"

int main(int argc, char** argv) {
  if (argc < 3) {
    std::fprintf(stderr, "usage: linear_bench THREADS T [D F] [--repeats N]\n");
    return 1;
  }
  const int threads = std::atoi(argv[1]);
  const int64_t T = std::atoll(argv[2]);
  int64_t D = 384, F = 1536;
  int repeats = 200;
  std::vector<std::string> rest(argv + 3, argv + argc);
  for (size_t i = 0; i < rest.size(); ++i) {
    if (rest[i] == "--repeats" && i + 1 < rest.size()) repeats = std::atoi(rest[++i].c_str());
    else if (i == 0) D = std::atoll(rest[i].c_str());
    else if (i == 1) F = std::atoll(rest[i].c_str());
  }
  omp_set_num_threads(threads);
  std::mt19937 rng(7);
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  struct Shape { const char* name; int64_t in, out; };
  for (const Shape& s : {Shape{"qkv", D, 3 * D}, Shape{"o", D, D}, Shape{"up", D, F}, Shape{"down", F, D}}) {
    headscope::Tensor W({s.out, s.in}), b({s.out});
    for (float& v : W.data) v = u(rng);
    for (float& v : b.data) v = u(rng);
    const headscope::ops::PackedLinear lin(std::move(W), std::move(b));
    std::vector<float> x(size_t(T * s.in)), y(size_t(T * s.out));
    for (float& v : x) v = u(rng);
    const std::vector<double> ms = headscope::bench::sorted_times_ms(repeats, [&] { lin.forward(x.data(), T, y.data()); });
    const double gflop = 2.0 * T * s.in * s.out / 1e9;
    std::printf("{\"shape\": \"%s\", \"T\": %lld, \"threads\": %d, \"median_ms\": %.4f, \"gflops\": %.1f}\n", s.name,
                static_cast<long long>(T), threads, ms[ms.size() / 2], gflop / (ms[ms.size() / 2] / 1e3));
  }
  return 0;
}
