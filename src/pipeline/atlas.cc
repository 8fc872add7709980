// headscope pipeline — make_atlas(): the atlas of a model (and a control) as the files
// `headscope atlas` writes (see headscope/pipeline.h; method in src/analysis/atlas.h).
#include <chrono>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "analysis/atlas_report.h"
#include "analysis/syntax.h"
#include "headscope/error.h"
#include "headscope/limits.h"
#include "headscope/pipeline.h"
#include "pipeline/atlas.h"
#include "render/grid.h"

namespace headscope {

std::vector<Encoding> atlas_importance_texts(const Model& model, const analysis::AtlasOptions& options) {
  const ModelConfig& c = model.config();
  int64_t n = options.importance_texts;
  if (n < 0)
    n = c.n_layer * c.n_head <= limits::kMaxAtlasImportanceHeadsByDefault ? options.kDefaultImportanceTexts : 0;
  std::vector<Encoding> texts;
  if (n == 0) return texts;
  for (const analysis::DependencySentence& sentence : analysis::read_conllu(options.report_treebank)) {
    if (int64_t(texts.size()) == n) break;
    Encoding e;
    try {
      e = model.encode(analysis::join_words(sentence), /*truncate=*/true);
    } catch (const Error&) {
      continue;  // nothing to encode
    }
    if (!e.truncated && e.size() >= 2) texts.push_back(std::move(e));
  }
  return texts;
}

namespace {

// Zero ablation of every head alone over the importance texts, with the proxy and their Spearman
// correlation: the pipeline's importance (measure_importance, docs/causal.md) in the atlas's shape.
std::optional<analysis::AtlasImportance> atlas_importance(const Model& model, const analysis::AtlasOptions& options) {
  std::vector<Encoding> texts = atlas_importance_texts(model, options);
  if (texts.empty()) return std::nullopt;
  analysis::AtlasImportance out;
  out.texts = int64_t(texts.size());
  out.measure = ablation_measure(model.config());
  if (options.progress) options.progress("importance", 0, 1);
  const ImportanceResult importance = measure_importance(Ablator(model, std::move(texts), AblateOptions{}));
  for (const HeadImportance& h : importance.heads) {
    out.ablation.push_back(h.ablation);
    out.proxy.push_back(h.proxy);
  }
  out.spearman = importance.spearman;
  if (options.progress) options.progress("importance", 1, 1);
  return out;
}

}  // namespace

AtlasFiles make_atlas(const std::string& model_path, const std::string& control_path,
                      const analysis::AtlasOptions& options, const std::string& command_line,
                      const std::string& image_name, const LoadOptions& load) {
  std::vector<std::string> warnings;
  auto build = [&](const std::string& path, const std::string& stage_prefix) {
    const auto model = Model::load(path, load);
    for (const std::string& w : model->warnings()) warnings.push_back(stage_prefix + w);
    analysis::AtlasOptions o = options;
    if (!stage_prefix.empty()) o.partial_bytes.clear();  // a partial measured the main model only
    if (options.progress && !stage_prefix.empty())
      o.progress = [&](std::string_view stage, int64_t done, int64_t total) {
        options.progress(stage_prefix + std::string(stage), done, total);
      };
    analysis::AtlasResult atlas = build_atlas(*model, path, o);
    const auto t0 = std::chrono::steady_clock::now();
    atlas.importance = atlas_importance(*model, o);
    if (atlas.importance) {
      const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      atlas.seconds_per_stage.emplace_back("importance", s);
      atlas.seconds_total += s;
    }
    return atlas;
  };
  const analysis::AtlasResult main = build(model_path, "");
  std::unique_ptr<analysis::AtlasResult> control;
  if (!control_path.empty()) control = std::make_unique<analysis::AtlasResult>(build(control_path, "control: "));

  AtlasFiles files;
  files.json = analysis::atlas_json(main, control.get()).dump(1) + "\n";
  files.markdown = analysis::atlas_markdown(main, control.get(), command_line, image_name);
  const std::string title = "headscope atlas: " + main.config.name + " - primary role per head";
  files.png = render::grid_png(analysis::atlas_grid(main, title));
  if (control) {
    files.control_png =
        render::grid_png(analysis::atlas_grid(*control, "control (random weights): primary role per head"));
  }
  files.config = main.config;
  files.seconds = main.seconds_total;
  files.warnings = std::move(warnings);
  return files;
}

}  // namespace headscope
