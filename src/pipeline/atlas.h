// headscope pipeline — the head atlas's stages run through a model (the method and the result
// are described in analysis/atlas.h): the corpus, the treebanks and GAP encoded and run, the
// probe measured; the analysis scores what each run captured and joins the evidence into roles.
#pragma once
#include <string>

#include "analysis/atlas.h"
#include "headscope/model.h"

namespace headscope {

// Runs every stage. Throws Error for unreadable data files (naming them).
analysis::AtlasResult build_atlas(const Model& model, const std::string& model_path,
                                  const analysis::AtlasOptions& options);

}  // namespace headscope
