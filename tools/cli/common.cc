#include "cli/common.h"

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

}  // namespace headscope::cli
