// The linear layers of a forward pass alone: y = x · Wᵀ + b through ops::PackedLinear, for the
// shapes of a model (default: all-MiniLM-L6-v2 — d_model 384, d_ff 1536), at a given T and
// thread count. Prints GFLOP/s per shape: compare with `forward_bench --peak`.
// With --layers L, also times L distinct sets of the four layers run in forward order (qkv, o,
// up, down per set) — as in a forward pass, where all the weights do not stay in cache.
// --kernel blocked|panels forces one of PackedLinear's two kernels (default: its own choice by T).
//   linear_bench THREADS T [D F] [--repeats N] [--layers L] [--kernel K]
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
    std::fprintf(stderr, "usage: linear_bench THREADS T [D F] [--repeats N] [--layers L] [--kernel blocked|panels]\n");
    return 1;
  }
  const int threads = std::atoi(argv[1]);
  const int64_t T = std::atoll(argv[2]);
  int64_t D = 384, F = 1536;
  int repeats = 200, layers = 0;
  using Kernel = headscope::ops::PackedLinear::Kernel;
  Kernel kernel = Kernel::automatic;
  std::vector<std::string> rest(argv + 3, argv + argc);
  for (size_t i = 0; i < rest.size(); ++i) {
    if (rest[i] == "--repeats" && i + 1 < rest.size())
      repeats = std::atoi(rest[++i].c_str());
    else if (rest[i] == "--layers" && i + 1 < rest.size())
      layers = std::atoi(rest[++i].c_str());
    else if (rest[i] == "--kernel" && i + 1 < rest.size()) {
      const std::string k = rest[++i];
      kernel = k == "blocked" ? Kernel::blocked : k == "panels" ? Kernel::panels : Kernel::automatic;
    } else if (i == 0)
      D = std::atoll(rest[i].c_str());
    else if (i == 1)
      F = std::atoll(rest[i].c_str());
  }
  omp_set_num_threads(threads);
  std::mt19937 rng(7);
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  struct Shape {
    const char* name;
    int64_t in, out;
  };
  const Shape shapes[] = {{"qkv", D, 3 * D}, {"o", D, D}, {"up", D, F}, {"down", F, D}};
  auto report = [&](const std::string& name, const std::vector<double>& sorted_ms, double gflop) {
    const double ms = headscope::bench::median(sorted_ms);
    std::printf("{\"shape\": \"%s\", \"T\": %lld, \"threads\": %d, \"median_ms\": %.4f, \"gflops\": %.1f}\n",
                name.c_str(), static_cast<long long>(T), threads, ms, gflop / (ms / 1e3));
  };
  auto make = [&](const Shape& s) {
    headscope::Tensor W({s.out, s.in}), b({s.out});
    for (float& v : W.data) v = u(rng);
    for (float& v : b.data) v = u(rng);
    return headscope::ops::PackedLinear(std::move(W), std::move(b));
  };
  for (const Shape& s : shapes) {
    const headscope::ops::PackedLinear lin = make(s);
    std::vector<float> x(size_t(T * s.in)), y(size_t(T * s.out));
    for (float& v : x) v = u(rng);
    report(s.name, headscope::bench::sorted_times_ms(repeats, [&] { lin.forward(x.data(), T, y.data(), kernel); }),
           2.0 * T * s.in * s.out / 1e9);
  }
  if (layers > 0) {
    std::vector<headscope::ops::PackedLinear> stack;
    double gflop = 0;
    for (int l = 0; l < layers; ++l)
      for (const Shape& s : shapes) {
        stack.push_back(make(s));
        gflop += 2.0 * T * s.in * s.out / 1e9;
      }
    std::vector<float> x(size_t(T * std::max(D, F))), y(size_t(T * std::max(3 * D, F)));
    for (float& v : x) v = u(rng);
    report(std::to_string(layers) + " layers",
           headscope::bench::sorted_times_ms(repeats,
                                             [&] {
                                               for (const headscope::ops::PackedLinear& lin : stack)
                                                 lin.forward(x.data(), T, y.data(), kernel);
                                             }),
           gflop);
  }
  return 0;
}
