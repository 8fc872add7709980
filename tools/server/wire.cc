// headscope server — binary tensor format, base64 and UTF-8 validation (see wire.h).
#include "server/wire.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>

#include "headscope/error.h"

namespace headscope::server {
namespace {

static_assert(std::endian::native == std::endian::little,
              "the wire format is little-endian; a big-endian host would need byte swaps here");

void append_u32(std::string& out, uint32_t v) {
  char bytes[4];
  std::memcpy(bytes, &v, 4);
  out.append(bytes, 4);
}

}  // namespace

std::string encode_tensor(std::span<const float> values, const std::vector<int64_t>& shape, WireDtype dtype) {
  int64_t numel = 1;
  for (int64_t d : shape) numel *= d;
  if (numel != static_cast<int64_t>(values.size()))
    throw Error("encode_tensor: shape holds " + std::to_string(numel) + " values but " + std::to_string(values.size()) +
                " were given");
  const size_t item = dtype == WireDtype::kFloat32 ? 4 : 1;
  std::string out;
  out.reserve(12 + 4 * shape.size() + values.size() * item);
  out.append("HST1", 4);
  append_u32(out, static_cast<uint32_t>(dtype));
  append_u32(out, static_cast<uint32_t>(shape.size()));
  for (int64_t d : shape) append_u32(out, static_cast<uint32_t>(d));
  if (dtype == WireDtype::kFloat32) {
    out.append(reinterpret_cast<const char*>(values.data()), values.size() * 4);
  } else {
    const size_t start = out.size();
    out.resize(start + values.size());
    for (size_t i = 0; i < values.size(); ++i) {
      const float v = std::clamp(values[i], 0.0f, 1.0f);
      out[start + i] = static_cast<char>(static_cast<uint8_t>(std::lround(v * 255.0f)));
    }
  }
  return out;
}

}  // namespace headscope::server
