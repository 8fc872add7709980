// The RGB canvas; see canvas.h.
#include "render/canvas.h"

#include <algorithm>

#include "render/font.h"

namespace headscope::render {

Canvas::Canvas(int width, int height)
    : width_(width), height_(height), rgb_(static_cast<size_t>(width) * height * 3, 255) {}

void Canvas::fill(int x0, int y0, int w, int h, uint32_t color) {
  for (int y = std::max(0, y0); y < std::min(height_, y0 + h); ++y) {
    for (int x = std::max(0, x0); x < std::min(width_, x0 + w); ++x) {
      uint8_t* p = &rgb_[(static_cast<size_t>(y) * width_ + x) * 3];
      p[0] = static_cast<uint8_t>(color >> 16), p[1] = static_cast<uint8_t>(color >> 8),
      p[2] = static_cast<uint8_t>(color);
    }
  }
}

int Canvas::text(int x, int y, const std::string& text, uint32_t color, int scale) {
  int cx = x;
  for (char ch : text) {
    const Glyph& g = glyph(ch);
    for (int row = 0; row < kGlyphHeight; ++row) {
      for (int col = 0; col < kGlyphWidth; ++col) {
        if (g[static_cast<size_t>(row)] & (0x10 >> col)) fill(cx + col * scale, y + row * scale, scale, scale, color);
      }
    }
    cx += kGlyphAdvance * scale;
  }
  return cx - x;
}

int text_width(const std::string& text, int scale) { return static_cast<int>(text.size()) * kGlyphAdvance * scale; }

uint32_t ink_on(uint32_t background) {
  const double lum =
      0.299 * ((background >> 16) & 0xFF) + 0.587 * ((background >> 8) & 0xFF) + 0.114 * (background & 0xFF);
  return lum > 140 ? 0x000000 : 0xFFFFFF;
}

}  // namespace headscope::render
