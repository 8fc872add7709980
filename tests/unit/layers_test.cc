// The layer order of docs/architecture.md, checked against the includes of the source tree. The
// table in that document is the one statement of the order: its rows, top to bottom, are the
// layers, and the backquoted folders of a row's second column are that layer's folders. A file
// may include headers of its own layer and of the layers above it, never of one below; the
// frontends (every row below the pipeline's, except the tests and fuzzing, which test the
// internals) see only the public headers; every folder of src/ is in the table; and analysis/
// runs no model and no tokenizer.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <regex>
#include <sstream>
#include <string>
#include <vector>

namespace {

namespace fs = std::filesystem;

const fs::path kRoot = HEADSCOPE_SOURCE_DIR;

struct Layer {
  std::string name;                  // the row's first column
  std::vector<std::string> folders;  // "src/ops/", "tools/cli/", ...
};

std::string read_file(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

std::vector<std::string> split_cells(const std::string& line) {
  std::vector<std::string> cells;
  std::string cell;
  std::istringstream in(line);
  while (std::getline(in, cell, '|')) cells.push_back(cell);
  return cells;  // cells[0] is what precedes the first '|' (empty)
}

std::string trim(std::string s) {
  s.erase(0, s.find_first_not_of(" \t"));
  s.erase(s.find_last_not_of(" \t\r") + 1);
  return s;
}

// The rows of the table whose header is "| layer | folder | ...".
std::vector<Layer> layer_table() {
  std::istringstream doc(read_file(kRoot / "docs/architecture.md"));
  std::vector<Layer> layers;
  std::string line;
  bool in_table = false;
  const std::regex folder("`([A-Za-z0-9_./-]+/)`");
  while (std::getline(doc, line)) {
    if (!in_table) {
      const auto cells = split_cells(line);
      in_table = cells.size() >= 3 && trim(cells[1]) == "layer" && trim(cells[2]) == "folder";
      continue;
    }
    if (line.rfind('|', 0) != 0) break;  // the end of the table
    const auto cells = split_cells(line);
    if (cells.size() < 3 || trim(cells[1]).find_first_not_of("-: ") == std::string::npos) continue;  // |---|
    Layer layer{trim(cells[1]), {}};
    for (std::sregex_iterator m(cells[2].begin(), cells[2].end(), folder), end; m != end; ++m)
      layer.folders.push_back((*m)[1]);
    layers.push_back(std::move(layer));
  }
  return layers;
}

// Index of the layer holding `path` (relative to the root, '/'-separated), by the longest folder
// that prefixes it; -1 when none does.
int layer_of(const std::vector<Layer>& layers, const std::string& path) {
  int best = -1;
  size_t best_length = 0;
  for (size_t i = 0; i < layers.size(); ++i)
    for (const std::string& f : layers[i].folders)
      if (path.rfind(f, 0) == 0 && f.size() > best_length) best = int(i), best_length = f.size();
  return best;
}

bool is_source(const fs::path& p) {
  const std::string e = p.extension().string();
  return e == ".h" || e == ".cc" || e == ".hpp" || e == ".cpp";
}

// Every C++ file under `folder` (relative), as '/'-separated paths relative to the root.
std::vector<std::string> sources_under(const std::string& folder) {
  std::vector<std::string> out;
  const fs::path dir = kRoot / folder;
  if (!fs::is_directory(dir)) return out;
  for (auto it = fs::recursive_directory_iterator(dir); it != fs::recursive_directory_iterator(); ++it) {
    if (it->is_directory() && (it->path().filename() == "node_modules" || it->is_symlink())) {
      it.disable_recursion_pending();
      continue;
    }
    if (it->is_regular_file() && is_source(it->path())) out.push_back(fs::relative(it->path(), kRoot).generic_string());
  }
  return out;
}

// The file a quoted include names, as the compilers' include paths find it: next to the
// including file, then include/, src/, tools/, tests/ and fuzz/ (CMakeLists.txt); "" when none.
std::string resolve(const std::string& from, const std::string& name) {
  const fs::path candidates[] = {kRoot / fs::path(from).parent_path() / name,
                                 kRoot / "include" / name,
                                 kRoot / "src" / name,
                                 kRoot / "tools" / name,
                                 kRoot / "tests" / name,
                                 kRoot / "fuzz" / name};
  for (const fs::path& c : candidates)
    if (fs::is_regular_file(c)) return fs::relative(fs::weakly_canonical(c), kRoot).generic_string();
  return {};
}

std::vector<std::string> quoted_includes(const std::string& path) {
  std::vector<std::string> out;
  std::istringstream in(read_file(kRoot / path));
  const std::regex include(R"re(^\s*#\s*include\s*"([^"]+)")re");
  std::string line;
  std::smatch m;
  while (std::getline(in, line))
    if (std::regex_search(line, m, include)) out.push_back(m[1]);
  return out;
}

bool sees_internals(const Layer& layer) {
  return std::all_of(layer.folders.begin(), layer.folders.end(),
                     [](const std::string& f) { return f.rfind("tests/", 0) == 0 || f.rfind("fuzz/", 0) == 0; });
}

TEST(Layers, TheTableNamesEveryFolderOfSrcOnce) {
  const std::vector<Layer> layers = layer_table();
  ASSERT_GE(layers.size(), 10u) << "no layer table (| layer | folder | ...) found in docs/architecture.md";
  std::vector<std::string> listed;
  for (const Layer& l : layers) listed.insert(listed.end(), l.folders.begin(), l.folders.end());
  for (const auto& entry : fs::directory_iterator(kRoot / "src")) {
    if (!entry.is_directory()) continue;
    const std::string folder = "src/" + entry.path().filename().string() + "/";
    EXPECT_EQ(std::count(listed.begin(), listed.end(), folder), 1) << folder << " in the layer table";
  }
  EXPECT_EQ(std::count(listed.begin(), listed.end(), "include/headscope/"), 1);
}

TEST(Layers, NoFileIncludesALayerBelowItsOwn) {
  const std::vector<Layer> layers = layer_table();
  ASSERT_FALSE(layers.empty());
  int pipeline = -1;
  for (size_t i = 0; i < layers.size(); ++i)
    for (const std::string& f : layers[i].folders)
      if (f == "src/pipeline/") pipeline = int(i);
  ASSERT_GE(pipeline, 0) << "src/pipeline/ is not in the layer table";

  int files = 0, includes = 0;
  std::vector<std::string> broken;
  for (size_t i = 0; i < layers.size(); ++i)
    for (const std::string& folder : layers[i].folders)
      for (const std::string& file : sources_under(folder)) {
        const int own = layer_of(layers, file);
        if (own != int(i)) continue;  // a nested folder listed in a row of its own
        ++files;
        for (const std::string& name : quoted_includes(file)) {
          const std::string target = resolve(file, name);
          const int theirs = target.empty() ? -1 : layer_of(layers, target);
          if (theirs < 0) continue;  // a header outside the table (tests/test_support.h) or a system one
          ++includes;
          if (theirs > own)
            broken.push_back(file + " (" + layers[own].name + ") includes " + target + " (" + layers[theirs].name +
                             ", a layer below)");
          else if (own > pipeline && !sees_internals(layers[own]) && target.rfind("src/", 0) == 0)
            broken.push_back(file + " (" + layers[own].name + ") includes " + target +
                             ": frontends see only include/headscope/");
        }
      }
  EXPECT_GT(files, 100);
  EXPECT_GT(includes, 500);
  for (const std::string& b : broken) ADD_FAILURE() << b;
}

// analysis/ is pure functions over captured matrices: it takes no Model or Tokenizer to run, and
// calls no forward pass or encoder (the pipeline does: src/pipeline/atlas.h, probe.h, stream.h).
TEST(Layers, AnalysisRunsNoModelAndNoTokenizer) {
  const std::regex runs(
      R"((const\s+(Model|Tokenizer)\s*&)|(\bmodel\s*(\.|->)\s*(run|encode|extend|resume)\s*\()|(tokenizer\(\)))");
  int files = 0;
  for (const std::string& file : sources_under("src/analysis/")) {
    ++files;
    std::istringstream in(read_file(kRoot / file));
    std::string line;
    for (int n = 1; std::getline(in, line); ++n) {
      const std::string code = line.substr(0, line.find("//"));
      if (std::regex_search(code, runs)) ADD_FAILURE() << file << ":" << n << ": " << trim(line);
    }
  }
  EXPECT_GT(files, 10);
}

}  // namespace
