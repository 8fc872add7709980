// `headscope headmap` — every head of a model placed by how alike its attention is to every other
// head's over a corpus (docs/roles.md, "Head map"). Parses, calls head_map / cached_head_map
// (src/pipeline/evidence.cc), prints the closest pairs of heads and writes the JSON
// ("headscope.head_map/1", src/pipeline/evidence.cc) or one CSV row per head.
#include <omp.h>

#include <algorithm>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "cli/commands.h"
#include "cli/common.h"
#include "headscope/headscope.h"
#include "headscope/json.h"
#include "headscope/pipeline.h"

namespace headscope::cli {
namespace {

struct HeadMapArgs {
  LoadOptions load;
  std::string model = default_model_dir();
  std::string corpus, json_path, csv_path;
  EvidenceOptions evidence;
  int top = 10;
  int threads = 0;
};

// layer,head,x,y (0-based): one row per head.
std::string csv_rows(const analysis::HeadMap& m) {
  std::string csv = "# numbering: layers and heads from 0\nlayer,head,x,y\n";
  for (int l = 0; l < m.n_layer; ++l)
    for (int h = 0; h < m.n_head; ++h) {
      const size_t i = size_t(l) * size_t(m.n_head) + size_t(h);
      char line[96];
      std::snprintf(line, sizeof line, "%d,%d,%.9g,%.9g\n", l, h, m.x[i], m.y[i]);
      csv += line;
    }
  return csv;
}

void print_map(const analysis::HeadMap& m, const std::string& name, int top) {
  const int N = m.n_layer * m.n_head;
  std::printf(
      "head map of %s: %d heads over %lld texts (%lld query rows); the map's two axes hold %.0f %% of the "
      "differences\n",
      name.c_str(), N, static_cast<long long>(m.texts), static_cast<long long>(m.rows), 100 * m.explained);
  std::vector<std::pair<double, std::pair<int, int>>> pairs;
  for (int i = 0; i < N; ++i)
    for (int j = i + 1; j < N; ++j) pairs.push_back({m.distance[size_t(i) * N + j], {i, j}});
  const size_t n = std::min(pairs.size(), size_t(top));
  std::partial_sort(pairs.begin(), pairs.begin() + std::ptrdiff_t(n), pairs.end());
  std::printf("closest pairs (layer.head, 0-based; distance = sqrt of the mean Jensen-Shannon divergence, bits):\n");
  for (size_t k = 0; k < n; ++k) {
    const auto [i, j] = pairs[k].second;
    std::printf("  %3d.%-3d ~ %3d.%-3d %.4f\n", i / m.n_head, i % m.n_head, j / m.n_head, j % m.n_head, pairs[k].first);
  }
}

void headmap(HeadMapArgs a) {
  if (a.threads > 0) omp_set_num_threads(a.threads);
  auto model = load_model(a.model, a.load);
  analysis::HeadMap m;
  if (a.corpus.empty()) {
    m = cached_head_map(*model, a.model, a.evidence);
  } else {
    std::vector<std::string> texts;
    for (const CorpusText& t : read_corpus(a.corpus))
      if (t.error.empty()) texts.push_back(t.text);
    m = head_map(*model, texts);
  }
  print_map(m, model->config().name, a.top);
  if (!a.json_path.empty()) write_file(a.json_path, head_map_json(m, model->config()).dump() + "\n");
  if (!a.csv_path.empty()) write_file(a.csv_path, csv_rows(m));
}

}  // namespace

void add_headmap_command(CLI::App& app) {
  auto args = std::make_shared<HeadMapArgs>();
  CLI::App* cmd = app.add_subcommand(
      "headmap", "Every head placed by how alike its attention is to the others' over a corpus (Jensen-Shannon, MDS)");
  add_load_flags(cmd, args->load);
  cmd->add_option("--model,-m", args->model, "model folder (config.json, *.safetensors, tokenizer.json) or .gguf file");
  cmd->add_option("--corpus", args->corpus,
                  "texts to compare the heads on (one per line, .jsonl or .conllu; default: the first 40 sentences of "
                  "UD EWT dev in --data, cached beside the corpus evidence)");
  cmd->add_option("--data", args->evidence.data_dir, "gold data folder (default $HEADSCOPE_DATA, else ../shared/data)");
  cmd->add_option("--evidence-cache", args->evidence.cache_dir, "folder of the cached head map and corpus evidence");
  cmd->add_option("--top", args->top, "closest pairs to print")->check(CLI::Range(0, 1 << 20))->capture_default_str();
  cmd->add_option("--json", args->json_path, "write the map and every distance as JSON (headscope.head_map/1)");
  cmd->add_option("--csv", args->csv_path, "write one row per head: layer, head, x, y");
  cmd->add_option("--threads", args->threads, "OpenMP threads (default: all cores)")->check(CLI::Range(1, 1024));
  cmd->callback([args] { headmap(*args); });
}

}  // namespace headscope::cli
