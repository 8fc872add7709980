#include "cli/common.h"

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <iterator>

namespace headscope::cli {

std::string default_model_dir() {
  const char* env = std::getenv("HEADSCOPE_MODEL");
  return env != nullptr && *env != '\0' ? env : kDefaultModelDir;
}

std::string read_text_file(const std::string& path) {
  constexpr size_t kMaxBytes = 16u << 20;
  std::string text;
  if (path == "-") {
    text.assign(std::istreambuf_iterator<char>(std::cin), {});
  } else {
    std::ifstream in(path, std::ios::binary);
    if (!in) throw Error(path + ": cannot open the text file");
    text.assign(std::istreambuf_iterator<char>(in), {});
  }
  if (text.size() > kMaxBytes) throw Error(path + ": text file is larger than 16 MiB");
  return text;
}

void add_load_flags(CLI::App* command, LoadOptions& options) {
  command->add_flag("--strict", options.strict,
                    "Refuse a model whose weights hold NaN or Inf (by default it loads with a warning)");
  command
      ->add_option("--max-memory", options.run_memory_budget,
                   "Memory one run may use, e.g. 2G or 1500M (default: what the machine has available, less a "
                   "margin); a request over it is refused with the estimate before anything is allocated")
      ->transform(CLI::AsSizeValue(false));
}

std::unique_ptr<Model> load_model(const std::string& path, const LoadOptions& options) {
  std::unique_ptr<Model> model = Model::load(path, options);
  for (const std::string& w : model->warnings()) std::fprintf(stderr, "headscope: warning: %s\n", w.c_str());
  return model;
}

}  // namespace headscope::cli
