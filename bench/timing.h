// headscope benchmarks — one way to time a repeated call: a warm-up call, then `repeats` timed
// calls, returned sorted (front = fastest, middle = median).
#pragma once
#include <algorithm>
#include <chrono>
#include <vector>

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

}  // namespace headscope::bench
