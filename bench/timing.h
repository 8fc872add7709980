// headscope benchmarks — one way to time a repeated call: a warm-up call, then `repeats` timed
// calls, returned sorted (front = fastest, middle = median).
#pragma once
#include <algorithm>
#include <chrono>
#include <vector>

#include "ops/matmul.h"

namespace headscope::bench {

template <typename F>
std::vector<double> sorted_times_ms(int repeats, F&& f) {
  using Clock = std::chrono::steady_clock;
  f();  // warm-up: pages in weights, creates cached plans
  std::vector<double> t;
  for (int r = 0; r < repeats; ++r) {
    const auto t0 = Clock::now();
    f();
    t.push_back(std::chrono::duration<double, std::milli>(Clock::now() - t0).count());
  }
  std::sort(t.begin(), t.end());
  return t;
}

inline double median(const std::vector<double>& sorted) { return sorted[sorted.size() / 2]; }

// This machine's fp32 GEMM peak on the current OpenMP threads, GFLOP/s: the best of five
// 2048³ products through the kernels' own GEMM (what a compute floor is measured against).
inline double sgemm_peak_gflops() {
  const int64_t n = 2048;
  std::vector<float> a(n * n, 1.0f), b(n * n, 0.5f), c(n * n);
  const std::vector<double> times =
      sorted_times_ms(5, [&] { ops::matmul(a.data(), n, b.data(), n, c.data(), n, n, n, n, false); });
  return 2.0 * n * n * n / (times[0] * 1e6);
}

}  // namespace headscope::bench
