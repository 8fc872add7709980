// headscope analysis — the atlas written out: JSON (schema "headscope.atlas/2", described in
// docs/atlas.md), a Markdown report, and the grid of layers × heads coloured by primary role as a
// render::Grid (render/grid.h draws it as PNG). These only format an AtlasResult; the caller
// writes the bytes where it wants them.
#pragma once
#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "analysis/atlas.h"
#include "render/grid.h"

namespace headscope::analysis {

// `control` (may be null): the same atlas for a control model (e.g. randomly initialised weights),
// reported beside the main one.
nlohmann::json atlas_json(const AtlasResult& atlas, const AtlasResult* control);
// `image` (may be empty): file name of the PNG grid, linked from the report.
std::string atlas_markdown(const AtlasResult& atlas, const AtlasResult* control, const std::string& command_line,
                           const std::string& image);

// The picture of the atlas, for render::grid_png: one cell per head (rows = layers, columns =
// heads) filled with the primary role's colour, a band along its bottom in the secondary role's
// colour, the role's detail and confidence written in the cell, and a legend of the roles.
render::Grid atlas_grid(const AtlasResult& atlas, const std::string& title);

}  // namespace headscope::analysis
