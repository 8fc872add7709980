// headscope pipeline — the head atlas's stages run through a model (the method and the result
// are described in analysis/atlas.h): the corpus, the treebanks and GAP encoded and run, the
// probe measured; the analysis scores what each run captured and joins the evidence into roles.
#pragma once
#include <array>
#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "analysis/atlas.h"
#include "analysis/coref.h"
#include "analysis/statistics.h"
#include "analysis/syntax.h"
#include "headscope/model.h"
#include "headscope/pipeline.h"

namespace headscope {

// Runs every stage. Throws Error for unreadable data files (naming them). With
// AtlasOptions::partial_bytes, the treebank and GAP stages are those bytes' (shards run elsewhere,
// merged: below), and only the corpus stage, the probe and the joining run here.
analysis::AtlasResult build_atlas(const Model& model, const std::string& model_path,
                                  const analysis::AtlasOptions& options);

// ---- an atlas's data stages in shards (docs/corpus.md, "Ray"; AtlasShard in headscope/pipeline.h) ----

// What the treebank and GAP stages count and sum over a shard. Counts are integers and statistics
// exact sums (analysis/fixed_point.h), so the shards of a split, merged in any order, give bit for
// bit the numbers of one pass over all the items.
struct AtlasPartial {
  int n_layer = 0, n_head = 0;
  analysis::DependencyScorer report{0}, select{0};
  analysis::CorefScorer coref_report{0}, coref_select{0};
  analysis::ModelStatsAccumulator token_stats, word_stats;  // over the report treebank (without a corpus)
  analysis::ModelStatsAccumulator token_free_stats;         // the same, a causal model's rows without the sink
  int64_t report_sentences = 0, select_sentences = 0, skipped_sentences = 0;
  int64_t texts = 0, tokens = 0;                        // the sentences the statistics count
  std::vector<std::pair<std::string, double>> seconds;  // per stage, summed over shards
  explicit AtlasPartial(const ModelConfig& config);
  void merge(const AtlasPartial& other);  // Error for another model's shape
};
// The shard's stages on `model` (the data files of `options`, read here).
AtlasPartial atlas_partial(const Model& model, const analysis::AtlasOptions& options, const AtlasShard& shard);
// As bytes (CBOR of "headscope.atlas_partial/2") and back; Error for bytes that are not a partial.
std::string atlas_partial_to_bytes(const AtlasPartial& partial);
AtlasPartial atlas_partial_from_bytes(std::string_view bytes);

}  // namespace headscope
