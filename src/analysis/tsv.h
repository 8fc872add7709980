// headscope analysis — reading the gold data files (CoNLL-U, GAP): whole-file reads and
// tab-separated fields.
#pragma once
#include <sstream>
#include <string>
#include <string_view>
#include <vector>

#include "headscope/error.h"
#include "headscope/input.h"
#include "headscope/limits.h"

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
  try {
    return read_input_file(path, what, limits::kMaxGoldFileBytes);
  } catch (const NotAFileError&) {
    throw;
  } catch (const ResourceError&) {
    throw;
  } catch (const Error&) {
    throw Error(what + " '" + path + "': cannot open it; " + hint);
  }
}

}  // namespace headscope::analysis
