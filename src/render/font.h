// headscope render — a 5×7 bitmap font for the few labels the report images carry.
#pragma once
#include <array>
#include <cstdint>

namespace headscope::render {

// One character: seven rows, top first; in each, the low 5 bits are the pixels, the most
// significant (0x10) leftmost.
using Glyph = std::array<uint8_t, 7>;
constexpr int kGlyphWidth = 5, kGlyphHeight = 7;
constexpr int kGlyphAdvance = 6;  // a glyph and one column of space

// Upper case, digits, space and `-+/().,:%_<>=?`; lower case is drawn as upper case, any other
// character as '?'.
const Glyph& glyph(char c);

}  // namespace headscope::render
