// render/: pixels of the canvas and its bitmap font checked against the glyph rows written out by
// hand, the PNG header against the format (PNG spec §5.2 signature, §11.2.2 IHDR), and the
// grid's refusal of a cell count that does not match its rows and columns.
#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <vector>

#include "headscope/error.h"
#include "render/canvas.h"
#include "render/font.h"
#include "render/grid.h"
#include "render/png.h"

using namespace headscope::render;

namespace {

bool is_color(const Canvas& c, int x, int y, uint32_t color) {
  const uint8_t* p = &c.rgb()[(static_cast<size_t>(y) * c.width() + x) * 3];
  return p[0] == (color >> 16 & 0xFF) && p[1] == (color >> 8 & 0xFF) && p[2] == (color & 0xFF);
}

TEST(Canvas, FillIsClippedToTheCanvas) {
  Canvas c(4, 3);
  c.fill(2, 1, 10, 10, 0x102030);
  for (int y = 0; y < 3; ++y)
    for (int x = 0; x < 4; ++x) EXPECT_TRUE(is_color(c, x, y, x >= 2 && y >= 1 ? 0x102030 : 0xFFFFFF)) << x << "," << y;
}

TEST(Canvas, TextDrawsTheGlyphBitsAtScale) {
  // 'L' is a left column and a bottom row: rows 0x10 × 6, then 0x1F.
  Canvas c(20, 20);
  EXPECT_EQ(c.text(1, 2, "l", 0x000000, 2), 12);  // lower case drawn as upper case; advance 6 × 2
  for (int y = 0; y < 20; ++y)
    for (int x = 0; x < 20; ++x) {
      const int col = (x - 1) / 2, row = (y - 2) / 2;
      const bool inside = x >= 1 && y >= 2 && col < 5 && row < 7;
      const bool ink = inside && (col == 0 || row == 6);
      EXPECT_TRUE(is_color(c, x, y, ink ? 0x000000 : 0xFFFFFF)) << x << "," << y;
    }
  EXPECT_EQ(glyph('~'), glyph('?'));  // not in the font
  EXPECT_EQ(text_width("abc", 3), 54);
  EXPECT_EQ(ink_on(0xFFFF00), 0x000000u);  // yellow: luma 226
  EXPECT_EQ(ink_on(0x0000FF), 0xFFFFFFu);  // blue: luma 29
}

TEST(Png, SignatureAndHeaderFollowTheSpec) {
  const std::vector<uint8_t> png = encode_png(Canvas(300, 2));
  ASSERT_GT(png.size(), 33u);
  const std::vector<uint8_t> signature = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1A, '\n'};
  EXPECT_EQ(std::vector<uint8_t>(png.begin(), png.begin() + 8), signature);
  EXPECT_EQ(std::string(png.begin() + 12, png.begin() + 16), "IHDR");
  // width and height big-endian, then bit depth 8 and colour type 2 (RGB)
  const std::vector<uint8_t> ihdr = {0, 0, 1, 44, 0, 0, 0, 2, 8, 2};
  EXPECT_EQ(std::vector<uint8_t>(png.begin() + 16, png.begin() + 26), ihdr);
}

TEST(Grid, CellCountMustMatchTheLabels) {
  Grid g;
  g.row_labels = {"L0", "L1"};
  g.column_labels = {"H0"};
  g.cells.resize(1);
  EXPECT_THROW(grid_png(g), headscope::Error);
  g.cells.resize(2);
  EXPECT_GT(grid_png(g).size(), 8u);
}

}  // namespace
