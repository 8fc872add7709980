// headscope — the one tensor type of the public API: an owning, row-major fp32 buffer with a
// shape. Weights of every dtype are converted to fp32 at load time, so model code never
// branches on storage (STYLE.md, "declare each tensor once").
#pragma once
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
  explicit Tensor(std::vector<int64_t> shape_in) : shape(std::move(shape_in)), data(count(shape), 0.0f) {}

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
