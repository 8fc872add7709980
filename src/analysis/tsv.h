// headscope analysis — reading the gold data files (CoNLL-U, GAP): whole-file reads and
// tab-separated fields.
#pragma once
#include <fstream>
#include <sstream>
#include <string>
#include <string_view>
#include <vector>

#include "headscope/error.h"

namespace headscope::analysis {

// Fields of one line, split on every tab (empty fields kept); views into `line`.
inline std::vector<std::string_view> split_tabs(std::string_view line) {
  std::vector<std::string_view> fields;
  size_t start = 0;
  while (true) {
    const size_t tab = line.find('\t', start);
    fields.push_back(line.substr(start, tab == std::string_view::npos ? std::string_view::npos : tab - start));
    if (tab == std::string_view::npos) break;
    start = tab + 1;
  }
  return fields;
}

// The whole file; if it cannot be opened, Error("<what> '<path>': cannot open it; <hint>").
inline std::string read_gold_file(const std::string& path, const std::string& what, const std::string& hint) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw Error(what + " '" + path + "': cannot open it; " + hint);
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

}  // namespace headscope::analysis
