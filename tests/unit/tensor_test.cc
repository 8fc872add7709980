// Tensor storage: zero-fill where promised, reuse of released large buffers, bounded cache.
#include <gtest/gtest.h>

#include <algorithm>

#include "headscope/tensor.h"

namespace headscope {
namespace {

TEST(Tensor, ZeroFilledEvenWhenItsMemoryIsReused) {
  const std::vector<int64_t> shape{4, 1024, 1024};  // 16 MiB: a cached size
  const float* first = nullptr;
  {
    Tensor dirty(shape, Tensor::Uninitialized{});
    std::fill(dirty.data.begin(), dirty.data.end(), 7.0f);
    first = dirty.ptr();
  }
  EXPECT_GE(detail::cached_buffer_bytes(), size_t(16) << 20);
  const Tensor clean(shape);
  EXPECT_EQ(clean.ptr(), first);  // the released buffer came back…
  EXPECT_TRUE(std::all_of(clean.data.begin(), clean.data.end(), [](float v) { return v == 0.0f; }));  // …zeroed
  EXPECT_EQ(clean.numel(), 4 * 1024 * 1024);
}

TEST(Tensor, DifferentSizesDoNotShareABuffer) {
  const float* a_ptr = nullptr;
  { Tensor a({8, 1024, 1024}, Tensor::Uninitialized{}); a_ptr = a.ptr(); }
  const Tensor b({6, 1024, 1024}, Tensor::Uninitialized{});
  EXPECT_NE(b.ptr(), a_ptr);
  EXPECT_EQ(b.numel(), 6 * 1024 * 1024);
}

TEST(Tensor, CacheStaysBounded) {
  for (int i = 0; i < 40; ++i) Tensor t({int64_t(5 + i), 1024, 1024}, Tensor::Uninitialized{});  // 20…176 MiB each
  EXPECT_LE(detail::cached_buffer_bytes(), size_t(768) << 20);
}

TEST(Tensor, SmallTensorsAndCopies) {
  Tensor t({2, 3});
  EXPECT_EQ(t.values(), std::vector<float>(6, 0.0f));
  t.data[4] = 2.5f;
  const Tensor copy = t;
  EXPECT_EQ(copy.values()[4], 2.5f);
  EXPECT_EQ(copy.shape_str(), "[2, 3]");
}

}  // namespace
}  // namespace headscope
