// headscope server — how tensors travel over HTTP (the format is documented in docs/api.md).
//
// Attention is large (n_layer · n_head · T² values: 19 M floats for 512 tokens on a 6 × 12 model),
// so it is sent as raw little-endian numbers behind a small header instead of nested JSON lists:
//
//   offset  size        field
//   0       4           magic "HST1"
//   4       4           dtype: 1 = float32, 2 = uint8 (value = byte / 255, rounded to nearest)
//   8       4           rank r
//   12      4·r         shape, outermost axis first
//   12+4r   numel·size  the values, row-major
//
// The header is a multiple of 4 bytes, so a browser can view float32 data in place
// (new Float32Array(buffer, 12 + 4r, numel)). Small vectors inside JSON replies use the same
// idea: {"shape": [...], "dtype": "float32", "data": "<base64 of the little-endian bytes>"}.
#pragma once
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "headscope/json.h"
#include "headscope/pipeline.h"

namespace headscope::server {

enum class WireDtype : uint32_t {
  kFloat32 = 1,
  kUint8 = 2,  // for values in [0, 1] (attention probabilities): a quarter of the bytes
};

// Encodes `values` (row-major, product of `shape` elements) in the binary format above.
std::string encode_tensor(std::span<const float> values, const std::vector<int64_t>& shape, WireDtype dtype);

// Base64 and the UTF-8 checks of requests and replies are the core's (headscope/json.h,
// headscope/pipeline.h, included above); the server's code finds them from its own namespace.

}  // namespace headscope::server
