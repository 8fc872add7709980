// headscope — normalizers, following tokenizers/src/normalizers/*.rs; see normalizers.h.
#include "tokenizer/normalizers.h"

#include <nlohmann/json.hpp>

#include "tokenizer/normalized_string.h"
#include "tokenizer/pattern.h"
#include "tokenizer/unicode.h"

namespace headscope::tokenizer {
namespace {

class SequenceNormalizer final : public Normalizer {
 public:
  std::vector<std::unique_ptr<Normalizer>> steps;
  void normalize(NormalizedString& s) const override {
    for (const auto& step : steps) step->normalize(s);
  }
};

class PrependNormalizer final : public Normalizer {
 public:
  std::u32string prefix;
  void normalize(NormalizedString& s) const override { prepend(s, prefix); }
};

class ReplaceNormalizer final : public Normalizer {
 public:
  std::u32string literal;        // when the pattern is {"String": ...}
  std::unique_ptr<Regex> regex;  // when it is {"Regex": ...}
  std::u32string content;
  void normalize(NormalizedString& s) const override {
    replace_matches(s, regex ? regex->find_all(s.chars()) : literal_matches(s.chars(), literal), content);
  }
};

class NfdNormalizer final : public Normalizer {
 public:
  void normalize(NormalizedString& s) const override { s.nfd(); }
};

class LowercaseNormalizer final : public Normalizer {
 public:
  void normalize(NormalizedString& s) const override { s.lowercase(); }
};

}  // namespace

// ------------------------------------------------------------------ readers

std::unique_ptr<Normalizer> sequence_normalizer(std::vector<std::unique_ptr<Normalizer>> steps) {
  auto seq = std::make_unique<SequenceNormalizer>();
  seq->steps = std::move(steps);
  return seq;
}

std::unique_ptr<Normalizer> read_sequence_normalizer(const nlohmann::json& spec, const std::string& path) {
  auto seq = std::make_unique<SequenceNormalizer>();
  for (const nlohmann::json& step : spec.at("normalizers")) {
    if (!step.is_null()) seq->steps.push_back(read_normalizer(step, path));
  }
  return seq;
}

std::unique_ptr<Normalizer> read_prepend_normalizer(const nlohmann::json& spec, const std::string& path) {
  auto n = std::make_unique<PrependNormalizer>();
  n->prefix = unicode::decode_utf8(spec.at("prepend").get<std::string>(), path).chars;
  return n;
}

std::unique_ptr<Normalizer> read_replace_normalizer(const nlohmann::json& spec, const std::string& path) {
  auto n = std::make_unique<ReplaceNormalizer>();
  read_pattern(spec.at("pattern"), path, n->literal, n->regex);
  n->content = unicode::decode_utf8(spec.at("content").get<std::string>(), path).chars;
  return n;
}

std::unique_ptr<Normalizer> read_nfd_normalizer(const nlohmann::json&, const std::string&) {
  return std::make_unique<NfdNormalizer>();
}

std::unique_ptr<Normalizer> read_lowercase_normalizer(const nlohmann::json&, const std::string&) {
  return std::make_unique<LowercaseNormalizer>();
}

}  // namespace headscope::tokenizer
