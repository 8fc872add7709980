// ops::keep_greater / keep_less (compact.h) on each instruction-set path against a plain loop:
// the kept values, in order, and their count, in place and into another buffer.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <random>
#include <vector>

#include "kernel_paths.h"
#include "ops/compact.h"

namespace {

using headscope::ops::keep_greater;
using headscope::ops::keep_less;

std::vector<float> kept_by_loop(const std::vector<float>& v, float pivot, bool greater) {
  std::vector<float> out;
  for (float w : v)
    if (greater ? w > pivot : w < pivot) out.push_back(w);
  return out;
}

class CompactPath : public headscope::testing::KernelPathTest {};

TEST_P(CompactPath, KeepsTheValuesOnOneSideInOrder) {
  std::mt19937 rng(3);
  std::uniform_real_distribution<float> u(0.0f, 1.0f);
  // Lengths around the 8- and 16-lane steps, and a long row; repeated values equal to the pivot
  // (neither side keeps them) and NaNs (never kept).
  for (int n : {0, 1, 7, 8, 9, 15, 16, 17, 31, 33, 100, 1025, 8191}) {
    std::vector<float> v(static_cast<size_t>(n));
    for (float& w : v) w = u(rng);
    for (int i = 0; i < n; i += 5) v[size_t(i)] = 0.5f;
    if (n > 3) v[3] = std::numeric_limits<float>::quiet_NaN();
    for (const bool greater : {true, false}) {
      const std::vector<float> want = kept_by_loop(v, 0.5f, greater);
      std::vector<float> out(v.size(), -1.0f);
      const int m = greater ? keep_greater(v.data(), out.data(), n, 0.5f) : keep_less(v.data(), out.data(), n, 0.5f);
      ASSERT_EQ(m, static_cast<int>(want.size())) << "n = " << n;
      for (int i = 0; i < m; ++i) EXPECT_EQ(out[size_t(i)], want[size_t(i)]) << "n = " << n << " i = " << i;
      std::vector<float> in_place = v;
      const int m2 = greater ? keep_greater(in_place.data(), in_place.data(), n, 0.5f)
                             : keep_less(in_place.data(), in_place.data(), n, 0.5f);
      ASSERT_EQ(m2, m);
      for (int i = 0; i < m; ++i) EXPECT_EQ(in_place[size_t(i)], want[size_t(i)]) << "in place, n = " << n;
    }
  }
}

INSTANTIATE_KERNEL_PATHS(CompactPath);

}  // namespace
