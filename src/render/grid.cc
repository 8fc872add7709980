// The labelled grid as PNG; see grid.h.
#include "render/grid.h"

#include <algorithm>

#include "headscope/error.h"
#include "render/canvas.h"
#include "render/png.h"

namespace headscope::render {

std::vector<uint8_t> grid_png(const Grid& grid) {
  const int rows = static_cast<int>(grid.row_labels.size()), cols = static_cast<int>(grid.column_labels.size());
  if (grid.cells.size() != static_cast<size_t>(rows) * static_cast<size_t>(cols))
    throw Error("grid_png: " + std::to_string(grid.cells.size()) + " cells for " + std::to_string(rows) + " rows × " +
                std::to_string(cols) + " columns");
  // Layout in pixels: cells with a gap between them, row labels left of the grid, the title above.
  constexpr int kCellW = 72, kCellH = 44, kGap = 2, kMargin = 16, kLabelW = 40, kTitleH = 34, kBand = 8;
  constexpr int kLegendRow = 20;
  constexpr size_t kLabelChars = 11;  // what fits in a cell at scale 1
  const int grid_w = cols * (kCellW + kGap), grid_h = rows * (kCellH + kGap);
  const int legend_rows = static_cast<int>(grid.legend.size());
  const int width = std::max(kMargin * 2 + kLabelW + grid_w, kMargin * 2 + text_width(grid.title, 2));
  const int height = kMargin + kTitleH + 16 + grid_h + 16 + legend_rows * kLegendRow + kMargin;
  Canvas img(width, height);
  img.text(kMargin, kMargin, grid.title, 0x000000, 2);
  const int x0 = kMargin + kLabelW, y0 = kMargin + kTitleH + 16;
  for (int c = 0; c < cols; ++c)
    img.text(x0 + c * (kCellW + kGap) + kCellW / 2 - 9, y0 - 12, grid.column_labels[static_cast<size_t>(c)], 0x333333,
             1);
  for (int r = 0; r < rows; ++r) {
    const int y = y0 + r * (kCellH + kGap);
    img.text(kMargin, y + kCellH / 2 - 7, grid.row_labels[static_cast<size_t>(r)], 0x333333, 2);
    for (int c = 0; c < cols; ++c) {
      const GridCell& cell = grid.cells[static_cast<size_t>(r * cols + c)];
      const int x = x0 + c * (kCellW + kGap);
      img.fill(x, y, kCellW, kCellH, cell.fill);
      img.fill(x, y + kCellH - kBand, kCellW, kBand, cell.band);
      const uint32_t ink = ink_on(cell.fill);
      img.text(x + 4, y + 5, cell.label.substr(0, kLabelChars), ink, 1);
      img.text(x + 4, y + 17, cell.value, ink, 1);
    }
  }
  int y = y0 + grid_h + 16;
  for (const GridLegendEntry& entry : grid.legend) {
    img.fill(kMargin, y, 14, 14, entry.color);
    img.text(kMargin + 22, y + 1, entry.text, 0x000000, 2);
    y += kLegendRow;
  }
  img.text(width - kMargin - text_width(grid.note, 1), y0 + grid_h + 4, grid.note, 0x555555, 1);
  return encode_png(img);
}

}  // namespace headscope::render
