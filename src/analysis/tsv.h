// headscope analysis — splitting the tab-separated lines of the gold data files (CoNLL-U, GAP).
#pragma once
#include <string_view>
#include <vector>

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

}  // namespace headscope::analysis
