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

namespace headscope::server {

enum class WireDtype : uint32_t {
  kFloat32 = 1,
  kUint8 = 2,  // for values in [0, 1] (attention probabilities): a quarter of the bytes
};

// Encodes `values` (row-major, product of `shape` elements) in the binary format above.
std::string encode_tensor(std::span<const float> values, const std::vector<int64_t>& shape, WireDtype dtype);

// Standard base64 (RFC 4648, with padding) of raw bytes.
std::string base64_encode(std::string_view bytes);

// The little-endian bytes of float32 values, as base64.
std::string base64_floats(std::span<const float> values);

// Whether `text` is well-formed UTF-8 (RFC 3629: no overlong forms, no surrogates, <= U+10FFFF).
// Sets `bad_offset` to the byte offset of the first bad sequence when it is not.
bool is_valid_utf8(std::string_view text, size_t* bad_offset = nullptr);

// The number of bytes (0 to 3) at the end of `text` that begin a multi-byte character without
// completing it, e.g. 1 for "caf\xC3" and 2 for "\xF0\x9F". 0 when the text ends on a whole
// character or on bytes that can never become one (those are not held back: no later byte fixes them).
size_t incomplete_utf8_tail(std::string_view text);

}  // namespace headscope::server
