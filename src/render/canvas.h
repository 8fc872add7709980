// headscope render — an RGB raster to draw report images on: filled rectangles and bitmap text.
// Pixels only; png.h encodes a canvas.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace headscope::render {

// Colours are 0xRRGGBB.
class Canvas {
 public:
  Canvas(int width, int height);  // all white
  int width() const { return width_; }
  int height() const { return height_; }
  const std::vector<uint8_t>& rgb() const { return rgb_; }  // [height, width, 3], row-major

  // Fills the rectangle [x0, x0 + w) × [y0, y0 + h), clipped to the canvas.
  void fill(int x0, int y0, int w, int h, uint32_t color);
  // Draws `text` with its top-left at (x, y), each font pixel `scale` × `scale`. Returns the width.
  int text(int x, int y, const std::string& text, uint32_t color, int scale);

 private:
  int width_, height_;
  std::vector<uint8_t> rgb_;
};

// Width in pixels of `text` drawn at `scale`.
int text_width(const std::string& text, int scale);
// Black or white, whichever reads better on `background` (by its luma, ITU-R BT.601 weights).
uint32_t ink_on(uint32_t background);

}  // namespace headscope::render
