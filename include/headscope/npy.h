// headscope — captured tensors as NumPy .npy files (format version 1.0; the byte layout is
// documented where it is written, src/io/npy.h).
#pragma once
#include <string>

#include "headscope/tensor.h"

namespace headscope::io {

// Writes `tensor` as float32 C-order; throws Error naming the path on failure.
void write_npy(const std::string& path, const Tensor& tensor);

}  // namespace headscope::io

namespace headscope {
using io::write_npy;
}  // namespace headscope
