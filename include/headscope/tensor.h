// headscope — the one tensor type of the public API: an owning, row-major fp32 buffer with a
// shape. Weights of every dtype are converted to fp32 at load time, so model code never
// branches on storage (STYLE.md, "declare each tensor once").
#pragma once
#include <sys/mman.h>

#include <cstdint>
#include <initializer_list>
#include <string>
#include <vector>

#include "headscope/error.h"

namespace headscope {

struct Tensor {
  std::vector<int64_t> shape;
  std::vector<float> data;

  Tensor() = default;
  // Zero-filled. Large buffers (attention maps) are first reserved and marked for transparent
  // huge pages, so that the zero-fill faults in 2 MiB pages rather than 4 KiB ones (about 4×
  // faster first touch on Linux; see ../shared/PERFORMANCE.md).
  explicit Tensor(std::vector<int64_t> shape_in) : shape(std::move(shape_in)) {
    const size_t n = static_cast<size_t>(count(shape));
    data.reserve(n);
    advise_huge_pages(data.data(), n * sizeof(float));
    data.resize(n, 0.0f);
  }

  static void advise_huge_pages(void* p, size_t bytes) {
    constexpr uintptr_t kHuge = uintptr_t(2) << 20;
    if (bytes < 2 * kHuge) return;
    const uintptr_t begin = (reinterpret_cast<uintptr_t>(p) + kHuge - 1) & ~(kHuge - 1);
    const uintptr_t end = (reinterpret_cast<uintptr_t>(p) + bytes) & ~(kHuge - 1);
    if (end > begin) madvise(reinterpret_cast<void*>(begin), end - begin, MADV_HUGEPAGE);
  }
  static int64_t count(const std::vector<int64_t>& s) {
    int64_t n = 1;
    for (int64_t d : s) n *= d;
    return n;
  }
  int64_t numel() const { return static_cast<int64_t>(data.size()); }
  int rank() const { return static_cast<int>(shape.size()); }
  int64_t dim(int i) const { return shape.at(static_cast<size_t>(i < 0 ? i + rank() : i)); }
  bool empty() const { return data.empty(); }
  float* ptr() { return data.data(); }
  const float* ptr() const { return data.data(); }
  std::string shape_str() const {
    std::string s = "[";
    for (size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
    return s + "]";
  }
  // Throws Error naming `what` unless the shape is exactly `expected` (-1 = any size on that axis).
  void expect_shape(std::initializer_list<int64_t> expected, const std::string& what) const {
    bool ok = expected.size() == shape.size();
    size_t i = 0;
    for (int64_t e : expected) {
      if (ok && e >= 0 && shape[i] != e) ok = false;
      ++i;
    }
    if (!ok) {
      std::string want = "[";
      i = 0;
      for (int64_t e : expected) want += (i++ ? ", " : "") + (e < 0 ? std::string("*") : std::to_string(e));
      throw Error(what + ": expected shape " + want + "], got " + shape_str());
    }
  }
};

}  // namespace headscope
