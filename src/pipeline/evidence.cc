// headscope pipeline — corpus_evidence(): each head's syntax, coreference and probe evidence,
// measured once per model by the atlas (src/analysis/atlas.h) on a few hundred gold sentences and
// GAP rows, and cached on disk (see headscope/pipeline.h for the key and the files looked for).
//
// Cache file: <cache_dir>/<model name>-<key>.json, "headscope.evidence/2":
//   {schema, key, model_path, source, syntax, coreference, n_layer, n_head,
//    heads: [{probe: {induction, duplicate, probe_length},
//             syntax: {relation, head_to_dependent, accuracy, baseline_accuracy, baseline_offset,
//                      support, sentences} | null,
//             coref: {accuracy, baseline_accuracy, baseline_name, support} | null}, ...]}
// A file that is unreadable, too big, of another key or shape is measured again and rewritten.
#include <algorithm>
#include <array>
#include <cctype>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <optional>
#include <sstream>
#include <string>
#include <system_error>

#include "analysis/head_map.h"
#include "headscope/error.h"
#include "headscope/json.h"
#include "headscope/pipeline.h"
#include "pipeline/atlas.h"
#include "pipeline/probe.h"

namespace headscope {
namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;

constexpr const char* kSchema = "headscope.evidence/2";

std::string env(const char* name) {
  const char* v = std::getenv(name);
  return v ? std::string(v) : std::string();
}

std::string data_dir(const EvidenceOptions& o) {
  if (!o.data_dir.empty()) return o.data_dir;
  const std::string e = env("HEADSCOPE_DATA");
  return e.empty() ? "../shared/data" : e;
}

std::string cache_dir(const EvidenceOptions& o) {
  if (!o.cache_dir.empty()) return o.cache_dir;
  if (const std::string e = env("HEADSCOPE_CACHE_DIR"); !e.empty()) return e;
  if (const std::string x = env("XDG_CACHE_HOME"); !x.empty()) return x + "/headscope";
  if (const std::string h = env("HOME"); !h.empty()) return h + "/.cache/headscope";
  return ".cache/headscope";
}

// The gold files, in the order report treebank, selection treebank, report GAP, selection GAP.
std::array<std::string, 4> gold_files(const EvidenceOptions& o) {
  const std::string d = data_dir(o);
  return {d + "/ud/en_pud-ud-test.conllu", d + "/ud/en_ewt-ud-dev.conllu", d + "/gap/gap-validation.tsv",
          d + "/gap/gap-development.tsv"};
}

bool is_file(const std::string& p) {
  std::error_code ec;
  return fs::is_regular_file(p, ec);
}

// FNV-1a, 64 bits: a cache key, not a defence against a crafted collision.
std::string fnv_hex(std::string_view s) {
  uint64_t h = 1469598103934665603ull;
  for (unsigned char c : s) h = (h ^ c) * 1099511628211ull;
  char buf[17];
  std::snprintf(buf, sizeof buf, "%016llx", static_cast<unsigned long long>(h));
  return buf;
}

void describe_file(std::ostringstream& out, const fs::path& p) {
  std::error_code ec;
  const auto size = fs::file_size(p, ec);
  const auto time = fs::last_write_time(p, ec);
  out << p.filename().string() << ' ' << (ec ? -1 : static_cast<long long>(size)) << ' '
      << static_cast<long long>(time.time_since_epoch().count()) << '\n';
}

std::string model_name(const std::string& model_path) {
  fs::path p = fs::path(model_path).lexically_normal();
  if (p.filename().empty()) p = p.parent_path();
  std::string name = p.stem().string();
  for (char& c : name)
    if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '_' || c == '.')) c = '_';
  return name.empty() ? "model" : name;
}

json head_to_json(const analysis::HeadEvidence& e) {
  json j;
  j["probe"] = e.probe ? json{{"induction", e.probe->induction},
                              {"duplicate", e.probe->duplicate},
                              {"probe_length", e.probe->probe_length}}
                       : json(nullptr);
  j["syntax"] = e.syntax ? json{{"relation", e.syntax->relation},
                                {"head_to_dependent", e.syntax->head_to_dependent},
                                {"accuracy", e.syntax->accuracy},
                                {"baseline_accuracy", e.syntax->baseline_accuracy},
                                {"baseline_offset", e.syntax->baseline_offset},
                                {"support", e.syntax->support},
                                {"sentences", e.syntax->sentences}}
                         : json(nullptr);
  j["coref"] = e.coref ? json{{"accuracy", e.coref->accuracy},
                              {"baseline_accuracy", e.coref->baseline_accuracy},
                              {"baseline_name", e.coref->baseline_name},
                              {"support", e.coref->support}}
                       : json(nullptr);
  return j;
}

analysis::HeadEvidence head_from_json(const json& j) {
  analysis::HeadEvidence e;
  if (const json& p = j.at("probe"); !p.is_null())
    e.probe = analysis::ProbeEvidence{p.at("induction").get<double>(), p.at("duplicate").get<double>(),
                                      p.at("probe_length").get<int>()};
  if (const json& s = j.at("syntax"); !s.is_null())
    e.syntax = analysis::SyntaxEvidence{s.at("relation").get<std::string>(), s.at("head_to_dependent").get<bool>(),
                                        s.at("accuracy").get<double>(),      s.at("baseline_accuracy").get<double>(),
                                        s.at("baseline_offset").get<int>(),  s.at("support").get<int64_t>(),
                                        s.at("sentences").get<int64_t>()};
  if (const json& c = j.at("coref"); !c.is_null())
    e.coref = analysis::CorefEvidence{c.at("accuracy").get<double>(), c.at("baseline_accuracy").get<double>(),
                                      c.at("baseline_name").get<std::string>(), c.at("support").get<int64_t>()};
  return e;
}

// The cached evidence, or nothing when the file is absent, too big, unreadable or not this key's.
std::optional<CorpusEvidence> read_cache(const std::string& path, const std::string& key, size_t n_heads) {
  std::error_code ec;
  if (!fs::is_regular_file(path, ec) || fs::file_size(path, ec) > limits::kMaxEvidenceFileBytes || ec)
    return std::nullopt;
  try {
    std::ifstream in(path, std::ios::binary);
    const json j = json::parse(in);
    if (j.at("schema") != kSchema || j.at("key") != key || j.at("heads").size() != n_heads) return std::nullopt;
    CorpusEvidence out;
    out.key = key;
    out.path = path;
    out.source = j.at("source").get<std::string>();
    out.syntax = j.at("syntax").get<bool>();
    out.coreference = j.at("coreference").get<bool>();
    out.from_cache = true;
    for (const json& h : j.at("heads")) out.heads.push_back(head_from_json(h));
    return out;
  } catch (const std::exception&) {
    return std::nullopt;
  }
}

// Writes `text` to `path` through a temporary file and a rename, so that a reader never sees half
// a file; false when it could not be written.
bool write_atomically(const std::string& path, const std::string& text) {
  std::error_code ec;
  fs::create_directories(fs::path(path).parent_path(), ec);
  const std::string tmp = path + ".tmp" + std::to_string(std::rand());
  {
    std::ofstream out(tmp, std::ios::binary);
    if (!out) return false;
    out << text;
    if (!out) return false;
  }
  fs::rename(tmp, path, ec);
  if (ec) fs::remove(tmp, ec);
  return !ec;
}

bool write_cache(const CorpusEvidence& e, const std::string& model_path, const ModelConfig& c) {
  json j = {{"schema", kSchema},    {"key", e.key},       {"model_path", model_path},
            {"source", e.source},   {"syntax", e.syntax}, {"coreference", e.coreference},
            {"n_layer", c.n_layer}, {"n_head", c.n_head}, {"heads", json::array()}};
  for (const analysis::HeadEvidence& h : e.heads) j["heads"].push_back(head_to_json(h));
  return write_atomically(e.path, j.dump(1) + "\n");
}

}  // namespace

std::string evidence_key(const std::string& model_path, const EvidenceOptions& options) {
  std::ostringstream d;
  d << kSchema << '\n';
  std::error_code ec;
  if (fs::is_directory(model_path, ec)) {
    std::vector<fs::path> files;
    for (const auto& entry : fs::directory_iterator(model_path, ec)) {
      const std::string name = entry.path().filename().string();
      const std::string ext = entry.path().extension().string();
      if (name == "config.json" || name == "tokenizer.json" || ext == ".safetensors" || ext == ".gguf")
        files.push_back(entry.path());
    }
    std::sort(files.begin(), files.end());
    for (const fs::path& f : files) describe_file(d, f);
  } else {
    describe_file(d, model_path);
  }
  for (const std::string& f : gold_files(options)) {
    const auto size = fs::file_size(f, ec);
    d << fs::path(f).filename().string() << ' ' << (ec ? -1 : static_cast<long long>(size)) << '\n';
  }
  d << options.sentences << ' ' << options.gap_rows << '\n';
  return fnv_hex(d.str());
}

analysis::AtlasOptions evidence_atlas_options(const EvidenceOptions& options) {
  const auto files = gold_files(options);
  analysis::AtlasOptions a;
  if (is_file(files[0])) {
    a.report_treebank = files[0];
    if (is_file(files[1])) a.select_treebank = files[1];
  }
  if (is_file(files[2])) {
    a.report_coref = files[2];
    if (is_file(files[3])) a.select_coref = files[3];
  }
  a.max_sentences = options.sentences;
  a.max_gap_rows = options.gap_rows;
  a.progress = options.progress;
  return a;
}

CorpusEvidence corpus_evidence(const Model& model, const std::string& model_path, const EvidenceOptions& options) {
  const ModelConfig& c = model.config();
  const size_t n_heads = static_cast<size_t>(c.n_layer) * static_cast<size_t>(c.n_head);
  const std::string key = evidence_key(model_path, options);
  const std::string path = cache_dir(options) + "/" + model_name(model_path) + "-" + key + ".json";
  if (options.use_cache)
    if (auto cached = read_cache(path, key, n_heads)) return *std::move(cached);

  CorpusEvidence out;
  out.key = key;
  out.path = path;
  if (!options.measure) {
    out.path.clear();
    out.source = "not measured yet for this model (no " + path + ")";
    out.missing = true;  // each frontend says how to measure it
    return out;
  }
  const analysis::AtlasOptions a = evidence_atlas_options(options);
  if (!a.report_treebank.empty()) {
    const analysis::AtlasResult r = build_atlas(model, model_path, a);
    out.syntax = true;
    out.coreference = r.coref.has_value() && r.coref->support_report > 0;
    out.heads = r.evidence;
    for (analysis::HeadEvidence& h : out.heads) h.stats = {};  // the text's own, at run time
    out.source = std::to_string(r.report_sentences) + " UD PUD sentences (heads chosen on " +
                 std::to_string(r.select_sentences) + (a.select_treebank.empty() ? " of the same" : " UD EWT dev") +
                 " sentences)";
    if (out.coreference)
      out.source += ", " + std::to_string(r.coref->support_report) + " GAP examples (chosen on " +
                    std::to_string(r.coref->support_select) + ")";
  } else {
    const auto probe = measure_probe(model, analysis::AtlasOptions{}.probe_length, analysis::AtlasOptions{}.probe_count,
                                     analysis::AtlasOptions{}.seed);
    out.heads.resize(n_heads);
    for (size_t i = 0; i < n_heads && i < probe.size(); ++i) out.heads[i].probe = probe[i];
    out.source = "no gold data under " + data_dir(options) + ": the probe and this text's statistics only";
  }
  if (!write_cache(out, model_path, c)) out.path.clear();
  return out;
}

// ---- the head map ----

analysis::HeadMap head_map(const Model& model, std::span<const std::string> texts) {
  const ModelConfig& c = model.config();
  analysis::HeadMapAccumulator acc(c.n_layer, c.n_head);
  const CaptureOptions capture = CaptureOptions::attention_only();
  std::vector<Encoding> batch;
  int64_t rows = 0;
  auto flush = [&] {
    if (batch.empty()) return;
    for (const Capture& cap : model.run_batch(batch, {&capture, 1})) acc.add(cap.attention);
    batch.clear();
    rows = 0;
  };
  for (const std::string& text : texts) {
    Encoding e = model.encode(text, /*truncate=*/true);
    if (e.size() == 0) continue;
    if (rows + int64_t(e.size()) > 2048) flush();
    rows += int64_t(e.size());
    batch.push_back(std::move(e));
  }
  flush();
  return acc.result();
}

json head_map_json(const analysis::HeadMap& m, const ModelConfig& config) {
  json heads = json::array();
  const std::vector<int> kv = kv_head_of(config);
  for (int l = 0; l < m.n_layer; ++l)
    for (int h = 0; h < m.n_head; ++h) {
      const size_t i = size_t(l) * m.n_head + h;
      heads.push_back({{"layer", l},
                       {"head", h},
                       {"kv_head", h < int(kv.size()) ? kv[size_t(h)] : h},
                       {"x", m.x[i]},
                       {"y", m.y[i]}});
    }
  const size_t N = size_t(m.n_layer) * m.n_head;
  json distance = json::array();
  for (size_t i = 0; i < N; ++i)
    distance.push_back(std::vector<double>(m.distance.begin() + std::ptrdiff_t(i * N),
                                           m.distance.begin() + std::ptrdiff_t((i + 1) * N)));
  return {{"schema", "headscope.head_map/1"},
          {"n_layer", m.n_layer},
          {"n_head", m.n_head},
          {"texts", m.texts},
          {"rows", m.rows},
          {"explained", m.explained},
          {"eigenvalues", m.eigenvalues},
          {"heads", heads},
          {"distance", distance}};
}

analysis::HeadMap head_map_from_json(const json& j) {
  try {
    if (j.at("schema") != "headscope.head_map/1") throw Error("not a head map");
    analysis::HeadMap m;
    m.n_layer = j.at("n_layer").get<int>();
    m.n_head = j.at("n_head").get<int>();
    m.texts = j.at("texts").get<int64_t>();
    m.rows = j.at("rows").get<int64_t>();
    m.explained = j.at("explained").get<double>();
    m.eigenvalues = j.at("eigenvalues").get<std::vector<double>>();
    const size_t N = size_t(m.n_layer) * size_t(m.n_head);
    const json& heads = j.at("heads");
    const json& distance = j.at("distance");
    if (m.n_layer <= 0 || m.n_head <= 0 || heads.size() != N || distance.size() != N) throw Error("its sizes disagree");
    for (const json& h : heads) {
      m.x.push_back(h.at("x").get<double>());
      m.y.push_back(h.at("y").get<double>());
    }
    for (const json& row : distance) {
      if (row.size() != N) throw Error("a distance row has the wrong length");
      for (const json& d : row) m.distance.push_back(d.get<double>());
    }
    return m;
  } catch (const json::exception& e) {
    throw Error(std::string("head map JSON: ") + e.what());
  } catch (const Error& e) {
    throw Error(std::string("head map JSON: ") + e.what());
  }
}

analysis::HeadMap cached_head_map(const Model& model, const std::string& model_path, const EvidenceOptions& options) {
  const ModelConfig& c = model.config();
  const std::string path =
      cache_dir(options) + "/" + model_name(model_path) + "-" + evidence_key(model_path, options) + "-headmap.json";
  std::error_code ec;
  if (options.use_cache && fs::is_regular_file(path, ec) && fs::file_size(path, ec) <= limits::kMaxEvidenceFileBytes) {
    try {
      std::ifstream in(path, std::ios::binary);
      analysis::HeadMap m = head_map_from_json(json::parse(in));
      if (m.n_layer == c.n_layer && m.n_head == c.n_head) return m;
    } catch (const std::exception&) {
      // unreadable or of another model: measured again below
    }
  }
  const std::string treebank = data_dir(options) + "/ud/en_ewt-ud-dev.conllu";
  if (!options.measure)
    throw Error("the head map of " + c.name + " is not measured yet (no " + path +
                "): run `headscope serve` with --measure-corpus, or `make evidence`");
  if (!is_file(treebank))
    throw Error("the head map needs UD EWT dev (" + treebank + "); pass --data with the gold data folder");
  std::vector<std::string> texts;  // each sentence's words joined by spaces, as a corpus job reads a treebank
  for (CorpusText& t : read_corpus(treebank)) {
    if (int64_t(texts.size()) >= limits::kHeadMapTexts) break;
    texts.push_back(std::move(t.text));
  }
  if (options.progress) options.progress("head map", 0, int64_t(texts.size()));
  const analysis::HeadMap m = head_map(model, texts);
  if (options.progress) options.progress("head map", int64_t(texts.size()), int64_t(texts.size()));
  write_atomically(path, head_map_json(m, c).dump() + "\n");  // unwritable: measured again next time
  return m;
}

}  // namespace headscope
