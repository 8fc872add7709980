// headscope render — a grid of coloured, labelled cells with a legend below, as PNG bytes. The
// atlas draws its layers × heads map with it (analysis::atlas_grid fills a Grid; the pipeline
// encodes it), so the analysis layer describes the picture and never touches pixels or libpng.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace headscope::render {

// Colours are 0xRRGGBB.
struct GridCell {
  uint32_t fill = 0xFFFFFF;  // the cell
  uint32_t band = 0xFFFFFF;  // a band along its bottom
  std::string label;         // first line (cut to 11 characters to fit the cell)
  std::string value;         // second line
};

struct GridLegendEntry {
  uint32_t color = 0;
  std::string text;
};

struct Grid {
  std::string title;
  std::vector<std::string> row_labels;     // left of each row, e.g. "L0"
  std::vector<std::string> column_labels;  // above each column, e.g. "H0"
  std::vector<GridCell> cells;             // [row, column], row-major
  std::vector<GridLegendEntry> legend;     // one line each, below the grid
  std::string note;                        // small, right-aligned under the grid (e.g. what the band means)
};

// Throws Error if cells.size() != rows × columns.
std::vector<uint8_t> grid_png(const Grid& grid);

}  // namespace headscope::render
