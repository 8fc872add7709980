// Helpers shared by the GoogleTest programs of tests/unit/.
#pragma once
#include <gtest/gtest.h>
#include <stdlib.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

#include "headscope/error.h"
#include "headscope/model.h"

namespace headscope::testing {

// A fresh directory, removed with everything in it at scope exit. Prefers tmpfs: the corruption
// tests write hundreds of small files, which on a disk-backed /tmp cost milliseconds each.
class TempDir {
 public:
  explicit TempDir(const std::string& prefix = "headscope") {
    namespace fs = std::filesystem;
    std::error_code ec;
    const fs::path base = fs::is_directory("/dev/shm", ec) ? fs::path("/dev/shm") : fs::temp_directory_path();
    std::string tmpl = (base / (prefix + "_XXXXXX")).string();
    if (::mkdtemp(tmpl.data()) == nullptr) throw std::runtime_error("mkdtemp failed");
    path_ = tmpl;
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  const std::filesystem::path& path() const { return path_; }
  std::string file(const std::string& name) const { return (path_ / name).string(); }

 private:
  std::filesystem::path path_;
};

// n normally distributed values (mean 0, standard deviation `scale`), reproducible from `seed`.
inline std::vector<float> random_vector(size_t n, unsigned seed, float scale = 1.0f) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> dist(0.0f, scale);
  std::vector<float> v(n);
  for (float& x : v) x = dist(rng);
  return v;
}

// Largest |a − b|; infinity when the sizes differ or any difference is NaN (a NaN must fail a bound).
inline float max_abs_diff(const std::vector<float>& a, const std::vector<float>& b) {
  if (a.size() != b.size()) return INFINITY;
  float m = 0.0f;
  for (size_t i = 0; i < a.size(); ++i) {
    const float d = std::abs(a[i] - b[i]);
    if (std::isnan(d)) return INFINITY;
    m = std::max(m, d);
  }
  return m;
}

// The value of an environment variable that `make test` sets (HEADSCOPE_GOLDENS, HEADSCOPE_MODEL,
// HEADSCOPE_DATA); a test failure and "" when it is missing, so the test fails rather than skips.
inline std::string env_or_fail(const char* name) {
  const char* v = std::getenv(name);
  if (v == nullptr || *v == '\0') {
    ADD_FAILURE() << name << " is not set; run the tests through `make test` (it generates the goldens first)";
    return "";
  }
  return v;
}

// The default model ($HEADSCOPE_MODEL), loaded once per test program and shared by its tests.
inline const Model& default_model() {
  static std::unique_ptr<Model> model = [] {
    const std::string dir = env_or_fail("HEADSCOPE_MODEL");
    return dir.empty() ? nullptr : Model::load(dir);
  }();
  if (!model) throw std::runtime_error("HEADSCOPE_MODEL is not set");
  return *model;
}

// $HEADSCOPE_GOLDENS/<sub>, where tests/reference/golden_*.py wrote this test's goldens.
inline std::filesystem::path goldens_dir(const std::string& sub) {
  const std::string dir = env_or_fail("HEADSCOPE_GOLDENS");
  return dir.empty() ? std::filesystem::path("/nonexistent") : std::filesystem::path(dir) / sub;
}

// A real decoder of the goldens ("smollm2", "gemma3_270m": the GGUF its manifest names), loaded
// once per test program.
inline const Model& real_decoder(const std::string& golden) {
  static std::map<std::string, std::unique_ptr<Model>> loaded;
  auto& m = loaded[golden];
  if (!m) {
    std::ifstream in(goldens_dir("decoders") / golden / "golden" / "manifest.json");
    if (!in) throw std::runtime_error("missing " + golden + " goldens: run `make goldens`");
    m = Model::load(nlohmann::json::parse(in).at("gguf").get<std::string>());
  }
  return *m;
}

inline void write_raw(const std::string& path, const std::string& content) {
  std::ofstream out(path, std::ios::binary);
  out.write(content.data(), static_cast<std::streamsize>(content.size()));
}

// `fn` must throw headscope::Error whose message contains every one of `parts`.
inline void expect_error(const std::function<void()>& fn, const std::vector<std::string>& parts) {
  try {
    fn();
  } catch (const headscope::Error& e) {
    const std::string msg = e.what();
    for (const auto& p : parts) EXPECT_NE(msg.find(p), std::string::npos) << "message lacks '" << p << "': " << msg;
    return;
  }
  ADD_FAILURE() << "expected headscope::Error";
}

}  // namespace headscope::testing
