// headscope pipeline — make_atlas(): the atlas of a model (and a control) as the files
// `headscope atlas` writes (see headscope/pipeline.h; method in src/analysis/atlas.h).
#include <memory>
#include <string>
#include <string_view>

#include "analysis/atlas.h"
#include "analysis/atlas_report.h"
#include "headscope/pipeline.h"
#include "render/grid.h"

namespace headscope {

AtlasFiles make_atlas(const std::string& model_path, const std::string& control_path,
                      const analysis::AtlasOptions& options, const std::string& command_line,
                      const std::string& image_name, const LoadOptions& load) {
  std::vector<std::string> warnings;
  auto build = [&](const std::string& path, const std::string& stage_prefix) {
    const auto model = Model::load(path, load);
    for (const std::string& w : model->warnings()) warnings.push_back(stage_prefix + w);
    analysis::AtlasOptions o = options;
    if (options.progress && !stage_prefix.empty())
      o.progress = [&](std::string_view stage, int64_t done, int64_t total) {
        options.progress(stage_prefix + std::string(stage), done, total);
      };
    return analysis::build_atlas(*model, path, o);
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
