// headscope render — a canvas as PNG bytes (8-bit RGB, no interlace, libpng's default filters and
// compression). The only file that includes libpng.
#pragma once
#include <cstdint>
#include <vector>

#include "render/canvas.h"

namespace headscope::render {

// Throws Error if libpng fails.
std::vector<uint8_t> encode_png(const Canvas& canvas);

}  // namespace headscope::render
