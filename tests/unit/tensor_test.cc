// Tensor storage: zero-fill where promised, reuse of released large buffers, bounded cache; and
// the row helpers of src/tensor/tensor_ops.h against hand-written expectations.
#include <gtest/gtest.h>
#if defined(__GLIBC__)
#include <malloc.h>
#endif

#include <algorithm>

#include "headscope/tensor.h"
#include "tensor/tensor_ops.h"

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
  {
    Tensor a({8, 1024, 1024}, Tensor::Uninitialized{});
    a_ptr = a.ptr();
  }
  const Tensor b({6, 1024, 1024}, Tensor::Uninitialized{});
  EXPECT_NE(b.ptr(), a_ptr);
  EXPECT_EQ(b.numel(), 6 * 1024 * 1024);
}

TEST(Tensor, CacheStaysBounded) {
  for (int i = 0; i < 40; ++i) Tensor t({int64_t(5 + i), 1024, 1024}, Tensor::Uninitialized{});  // 20…176 MiB each
  EXPECT_LE(detail::cached_buffer_bytes(), size_t(768) << 20);
}

#if defined(__GLIBC__)
TEST(Tensor, LargeBuffersStayOutOfMallocArenas) {
  // Sizes that fall, more of them than the storage keeps: once glibc frees a large block it
  // raises its mmap threshold to that block's size, and the smaller ones after it would be carved
  // from the arenas, where a server running texts of ever new lengths fragments them. The arenas'
  // own count of the bytes they hold must not grow by even one of these buffers.
  const size_t arena_before = mallinfo2().arena;
  for (int mib = 30; mib >= 5; --mib) {
    Tensor t({int64_t(mib), 1024, 256}, Tensor::Uninitialized{});  // mib MiB
    std::fill(t.data.begin(), t.data.end(), 1.0f);
  }
  const size_t arena_after = mallinfo2().arena;
  EXPECT_LT(arena_after, arena_before + (size_t(4) << 20))
      << "arenas grew from " << arena_before << " to " << arena_after << " bytes";
  EXPECT_LE(detail::cached_buffer_bytes(), size_t(768) << 20);
}
#endif

TEST(Tensor, SmallTensorsAndCopies) {
  Tensor t({2, 3});
  EXPECT_EQ(t.values(), std::vector<float>(6, 0.0f));
  t.data[4] = 2.5f;
  const Tensor copy = t;
  EXPECT_EQ(copy.values()[4], 2.5f);
  EXPECT_EQ(copy.shape_str(), "[2, 3]");
}

Tensor filled(std::vector<int64_t> shape, std::vector<float> values) {
  Tensor t(std::move(shape));
  t.data.assign(values.begin(), values.end());
  return t;
}

TEST(TensorOps, ConcatRowsStacksBlocksInOrder) {
  const Tensor a = filled({1, 3}, {1, 2, 3}), b = filled({2, 3}, {4, 5, 6, 7, 8, 9});
  const Tensor ab = concat_rows({&a, &b});
  EXPECT_EQ(ab.shape, (std::vector<int64_t>{3, 3}));
  EXPECT_EQ(ab.values(), (std::vector<float>{1, 2, 3, 4, 5, 6, 7, 8, 9}));
  const Tensor bias = concat_rows({&a, &a});  // rank 1 too: [3] + [3] -> [6]
  EXPECT_EQ(concat_rows({&bias}).values(), (std::vector<float>{1, 2, 3, 1, 2, 3}));
}

TEST(TensorOps, ConcatRowsRefusesDifferentTrailingShapes) {
  const Tensor a = filled({2, 3}, {1, 2, 3, 4, 5, 6}), b = filled({3, 2}, {1, 2, 3, 4, 5, 6}), v({3});
  EXPECT_THROW(concat_rows({&a, &b}), Error);
  EXPECT_THROW(concat_rows({&a, &v}), Error);
  EXPECT_THROW(concat_rows({}), Error);
}

TEST(TensorOps, TransposeSwapsAxes) {
  const Tensor t = transpose(filled({2, 3}, {1, 2, 3, 4, 5, 6}));  // rows (1 2 3), (4 5 6)
  EXPECT_EQ(t.shape, (std::vector<int64_t>{3, 2}));
  EXPECT_EQ(t.values(), (std::vector<float>{1, 4, 2, 5, 3, 6}));
  EXPECT_THROW(transpose(Tensor({2, 2, 2})), Error);
}

TEST(TensorOps, CopyRowsTakesAStridedColumnBlock) {
  // Columns 1..2 of a [3, 4] matrix (as one head's slice of a fused projection) into a dense [3, 2].
  const std::vector<float> src = {0, 1, 2, 3, 10, 11, 12, 13, 20, 21, 22, 23};
  std::vector<float> dst(6, -1.0f);
  copy_rows(dst.data(), 2, src.data() + 1, 4, 3, 2);
  EXPECT_EQ(dst, (std::vector<float>{1, 2, 11, 12, 21, 22}));
  std::vector<float> wide(9, -1.0f);  // and into a wider destination: the gap stays untouched
  copy_rows(wide.data(), 3, src.data(), 4, 3, 2);
  EXPECT_EQ(wide, (std::vector<float>{0, 1, -1, 10, 11, -1, 20, 21, -1}));
}

}  // namespace
}  // namespace headscope
