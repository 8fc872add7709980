// `headscope merge` — partial corpus statistics (`headscope run --corpus ... --partial`, one per
// shard) added up: the corpus's statistics as one pass over all the shards gives them, bit for bit
// (analysis::CorpusStats).
#include <memory>
#include <string>
#include <vector>

#include "cli/commands.h"
#include "cli/common.h"
#include "headscope/analysis.h"
#include "headscope/input.h"
#include "headscope/json.h"
#include "headscope/pipeline.h"

namespace headscope::cli {
namespace {

struct MergeArgs {
  std::vector<std::string> partials;
  std::string stats_path, partial_path;
};

void merge(const MergeArgs& a) {
  analysis::CorpusStats total;
  for (size_t i = 0; i < a.partials.size(); ++i) {
    analysis::CorpusStats part =
        analysis::CorpusStats::from_bytes(read_input_file(a.partials[i], "partial", limits::kMaxGoldFileBytes));
    if (i == 0)
      total = std::move(part);
    else
      total.merge(part);
  }
  if (!a.partial_path.empty()) write_file(a.partial_path, total.to_bytes());
  if (!a.stats_path.empty()) write_file(a.stats_path, corpus_stats_json(total).dump() + "\n");
}

}  // namespace

void add_merge_command(CLI::App& app) {
  auto args = std::make_shared<MergeArgs>();
  CLI::App* cmd = app.add_subcommand(
      "merge", "Add up partial corpus statistics (headscope run --corpus --partial) into the whole corpus's");
  cmd->add_option("partials", args->partials, "Partial results (CBOR), one per shard")->required();
  cmd->add_option("--stats", args->stats_path, "Write the merged statistics (JSON, docs/corpus.md)");
  cmd->add_option("--partial", args->partial_path, "Write the merged partial (CBOR), to merge again later");
  cmd->callback([args] {
    if (args->stats_path.empty() && args->partial_path.empty()) throw CLI::RequiredError("--stats or --partial");
    merge(*args);
  });
}

}  // namespace headscope::cli
