// headscope — the one tensor type of the public API: an owning, row-major fp32 buffer with a
// shape. Safetensors weights of every dtype are converted to fp32 at load time; GGUF linear
// weights stay in their stored blocks (QuantMatrix, src/tensor/quant_matrix.h) and are read through
// ops::quant_linear, so model code never branches on storage (STYLE.md, "declare each tensor once").
#pragma once
#include <cstdint>
#include <initializer_list>
#include <new>
#include <string>
#include <utility>
#include <vector>

#include "headscope/error.h"

namespace headscope {

namespace detail {
// Storage behind every Tensor (src/tensor/buffers.cc), 64-byte aligned. Buffers of 1 MiB and more are mapped
// from the kernel, and from 4 MiB aligned to 2 MiB and marked for transparent huge pages (about 4× faster
// first touch than 4 KiB pages, see ../shared/PERFORMANCE.md); when released, a bounded number of them is kept
// and handed out again for a request of the same size. Runs of the same length ask for the same capture sizes, so a
// second run writes into memory that is already mapped instead of faulting in fresh pages.
void* acquire_buffer(size_t bytes);
void release_buffer(void* p, size_t bytes) noexcept;
size_t cached_buffer_bytes() noexcept;  // what the cache holds now (tests)

template <class T>
struct BufferAllocator {
  using value_type = T;
  BufferAllocator() = default;
  template <class U>
  BufferAllocator(const BufferAllocator<U>&) noexcept {}
  T* allocate(size_t n) { return static_cast<T*>(acquire_buffer(n * sizeof(T))); }
  void deallocate(T* p, size_t n) noexcept { release_buffer(p, n * sizeof(T)); }
  // resize(n) without a value leaves floats uninitialised (Tensor::Uninitialized); with a value, fills.
  template <class U>
  void construct(U* p) noexcept {
    ::new (static_cast<void*>(p)) U;
  }
  template <class U, class... A>
  void construct(U* p, A&&... a) {
    ::new (static_cast<void*>(p)) U(std::forward<A>(a)...);
  }
  friend bool operator==(const BufferAllocator&, const BufferAllocator&) noexcept { return true; }
};
}  // namespace detail

struct Tensor {
  std::vector<int64_t> shape;
  std::vector<float, detail::BufferAllocator<float>> data;

  Tensor() = default;
  // Zero-filled.
  explicit Tensor(std::vector<int64_t> shape_in) : shape(std::move(shape_in)) {
    data.resize(static_cast<size_t>(count(shape)), 0.0f);
  }
  // Contents undefined: for buffers the caller overwrites completely (the capture of a run), where
  // a zero-fill would cost a full extra pass over memory.
  struct Uninitialized {};
  Tensor(std::vector<int64_t> shape_in, Uninitialized) : shape(std::move(shape_in)) {
    data.resize(static_cast<size_t>(count(shape)));
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
  std::vector<float> values() const { return {data.begin(), data.end()}; }  // a plain copy
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
