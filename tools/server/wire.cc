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

std::string base64_encode(std::string_view bytes) {
  static constexpr char kAlphabet[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  std::string out;
  out.reserve((bytes.size() + 2) / 3 * 4);
  size_t i = 0;
  for (; i + 3 <= bytes.size(); i += 3) {
    const uint32_t n = (uint8_t(bytes[i]) << 16) | (uint8_t(bytes[i + 1]) << 8) | uint8_t(bytes[i + 2]);
    out += kAlphabet[(n >> 18) & 63];
    out += kAlphabet[(n >> 12) & 63];
    out += kAlphabet[(n >> 6) & 63];
    out += kAlphabet[n & 63];
  }
  const size_t rest = bytes.size() - i;
  if (rest > 0) {
    uint32_t n = uint8_t(bytes[i]) << 16;
    if (rest == 2) n |= uint8_t(bytes[i + 1]) << 8;
    out += kAlphabet[(n >> 18) & 63];
    out += kAlphabet[(n >> 12) & 63];
    out += rest == 2 ? kAlphabet[(n >> 6) & 63] : '=';
    out += '=';
  }
  return out;
}

std::string base64_floats(std::span<const float> values) {
  return base64_encode(std::string_view(reinterpret_cast<const char*>(values.data()), values.size() * 4));
}

bool is_valid_utf8(std::string_view text, size_t* bad_offset) {
  const auto* s = reinterpret_cast<const unsigned char*>(text.data());
  const size_t n = text.size();
  size_t i = 0;
  auto fail = [&](size_t at) {
    if (bad_offset) *bad_offset = at;
    return false;
  };
  while (i < n) {
    const unsigned char c = s[i];
    if (c < 0x80) {
      ++i;
      continue;
    }
    // Lead byte → sequence length and the allowed range of the second byte (RFC 3629, table 3-7
    // of the Unicode standard), which rules out overlong forms, surrogates and > U+10FFFF.
    size_t len;
    unsigned char lo = 0x80, hi = 0xBF;
    if (c >= 0xC2 && c <= 0xDF) {
      len = 2;
    } else if (c >= 0xE0 && c <= 0xEF) {
      len = 3;
      if (c == 0xE0) lo = 0xA0;
      if (c == 0xED) hi = 0x9F;
    } else if (c >= 0xF0 && c <= 0xF4) {
      len = 4;
      if (c == 0xF0) lo = 0x90;
      if (c == 0xF4) hi = 0x8F;
    } else {
      return fail(i);
    }
    if (i + len > n) return fail(i);
    if (s[i + 1] < lo || s[i + 1] > hi) return fail(i);
    for (size_t k = 2; k < len; ++k)
      if (s[i + k] < 0x80 || s[i + k] > 0xBF) return fail(i);
    i += len;
  }
  return true;
}

size_t incomplete_utf8_tail(std::string_view text) {
  // Walk back over at most three continuation bytes to the lead byte of the last sequence.
  const auto* s = reinterpret_cast<const unsigned char*>(text.data());
  const size_t n = text.size();
  size_t start = n;
  while (start > 0 && n - start < 3 && (s[start - 1] & 0xC0) == 0x80) --start;
  if (start == 0) return 0;
  const unsigned char lead = s[start - 1];
  const size_t have = n - start + 1;  // lead byte and the continuation bytes after it
  const size_t need = lead >= 0xC2 && lead <= 0xDF   ? 2
                      : lead >= 0xE0 && lead <= 0xEF ? 3
                      : lead >= 0xF0 && lead <= 0xF4 ? 4
                                                     : 0;
  if (need == 0 || have >= need) return 0;
  // Held back only if what is there can still become a character: the second byte's range rules
  // out overlong forms, surrogates and code points above U+10FFFF (as in is_valid_utf8).
  if (have >= 2) {
    unsigned char lo = 0x80, hi = 0xBF;
    if (lead == 0xE0) lo = 0xA0;
    if (lead == 0xED) hi = 0x9F;
    if (lead == 0xF0) lo = 0x90;
    if (lead == 0xF4) hi = 0x8F;
    if (s[start] < lo || s[start] > hi) return 0;
  }
  return have;
}

}  // namespace headscope::server
