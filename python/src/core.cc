// headscope._core — the nanobind module behind the Python package (python/headscope/, docs/python.md).
//
// A thin translator like the CLI and the server (STYLE.md 10): it parses Python values into the
// public API's types, calls the pipeline (headscope/pipeline.h) with the GIL released, and hands
// the captured tensors back as NumPy arrays without copying them. The Python layer
// (headscope/__init__.py) wraps these in dataclasses; nothing here is meant to be called directly.
//
// Arrays: every array of a run (attention, head_outputs, contributions, hidden_states, queries,
// keys) is a read-only view of the C++ capture; the array's owner holds a shared_ptr to the run,
// so the capture lives as long as any array does. tile() and generate()'s attention are tensors of
// their own, moved into the array's owner (also no copy).
#include <nanobind/nanobind.h>
#include <nanobind/ndarray.h>
#include <nanobind/stl/function.h>
#include <nanobind/stl/optional.h>
#include <nanobind/stl/pair.h>
#include <nanobind/stl/shared_ptr.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/tuple.h>
#include <nanobind/stl/vector.h>
#include <omp.h>

#include <algorithm>
#include <filesystem>
#include <map>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "headscope/circuits.h"
#include "headscope/headscope.h"
#include "headscope/json.h"
#include "headscope/limits.h"
#include "headscope/pipeline.h"

namespace nb = nanobind;
using namespace nb::literals;

namespace headscope::python {
namespace {

using ReadOnlyArray = nb::ndarray<nb::numpy, const float, nb::c_contig>;
using Array = nb::ndarray<nb::numpy, float, nb::c_contig>;

// A NumPy view of `tensor` that keeps `owner` (whatever holds the tensor) alive: no copy.
template <class Owner>
ReadOnlyArray view_of(const Tensor& tensor, std::shared_ptr<Owner> owner) {
  auto* keep = new std::shared_ptr<Owner>(std::move(owner));
  nb::capsule capsule(keep, [](void* p) noexcept { delete static_cast<std::shared_ptr<Owner>*>(p); });
  std::vector<size_t> shape(tensor.shape.begin(), tensor.shape.end());
  return ReadOnlyArray(tensor.ptr(), shape.size(), shape.data(), capsule);
}

// A NumPy array that takes over `tensor`'s buffer (moved, not copied).
Array array_from(Tensor&& tensor) {
  auto* held = new Tensor(std::move(tensor));
  nb::capsule capsule(held, [](void* p) noexcept { delete static_cast<Tensor*>(p); });
  std::vector<size_t> shape(held->shape.begin(), held->shape.end());
  return Array(held->ptr(), shape.size(), shape.data(), capsule);
}

// An Error about a model path that is not there: raised as headscope.FileError (also an OSError).
struct FileError : Error {
  using Error::Error;
};

// A loaded model with what every run of it shares: the probe and the cached corpus evidence
// (each computed on first use), and one lock so that one forward pass runs at a time (a pass
// already uses every core; the server does the same, tools/server/run_cache.h).
struct PyModel {
  std::unique_ptr<Model> model;
  std::string path;
  int threads = 0;
  std::mutex run_mutex;
  std::once_flag probe_once, corpus_once;
  std::vector<analysis::ProbeEvidence> probe;
  CorpusEvidence corpus;
  std::vector<int32_t> special_ids;  // the ids the model's template adds (for runs from ids)

  void set_threads() const {
    if (threads > 0) omp_set_num_threads(threads);
  }
};

// One analysed text and the level its statistics are read at.
struct PyRun {
  std::shared_ptr<PyModel> owner;
  std::shared_ptr<const RunAnalysis> run;
  Level level = Level::kToken;
};

std::shared_ptr<PyModel> load(const std::string& path, std::optional<int> threads, bool strict) {
  if (threads && *threads < 1)
    throw Error("threads=" + std::to_string(*threads) + ": give at least 1 (or None for all cores)");
  auto m = std::make_shared<PyModel>();
  m->path = path;
  m->threads = threads.value_or(0);
  LoadOptions options;
  options.strict = strict;
  {
    nb::gil_scoped_release release;
    m->set_threads();
    try {
      m->model = Model::load(path, options);
    } catch (const Error& e) {
      std::error_code ec;
      if (!std::filesystem::exists(path, ec)) throw FileError(e.what());
      throw;
    }
    try {
      EncodeOptions o;
      for (const Token& t : m->model->tokenizer().encode("", o).tokens)
        if (t.special) m->special_ids.push_back(t.id);
    } catch (const Error&) {
    }
  }
  return m;
}

// The core's description of the model (GET /api/model without the server's limits and corpus
// evidence) as JSON; headscope.Model.description and Config read it.
std::string description_json(const PyModel& m) { return nlohmann::json(describe_model(*m.model)).dump(); }

void check_text_size(const std::string& text) {
  if (text.size() > limits::kMaxPythonTextBytes)
    throw Error("the text is " + std::to_string(text.size()) + " bytes; at most " +
                std::to_string(limits::kMaxPythonTextBytes) +
                " are taken (split it, or pass truncate=True for a "
                "prefix the model can hold)");
}

using EncodingTuple = std::tuple<std::vector<int32_t>, std::vector<std::string>,
                                 std::vector<std::pair<int64_t, int64_t>>, std::vector<bool>>;
EncodingTuple encoding_tuple(const Encoding& e) {
  EncodingTuple out;
  for (const Token& t : e.tokens) {
    std::get<0>(out).push_back(t.id);
    std::get<1>(out).push_back(t.text);
    std::get<2>(out).emplace_back(t.begin, t.end);
    std::get<3>(out).push_back(t.special);
  }
  return out;
}

// An encoding of given ids: each token its own word, spans over a text made of the tokens' own
// entries joined by spaces (there is no original text); the template's ids count as special.
std::pair<std::string, Encoding> encoding_of_ids(const PyModel& m, const std::vector<int64_t>& ids) {
  const int vocab = m.model->config().vocab_size;
  if (ids.empty()) throw Error("ids: the list is empty; give at least one token id");
  std::pair<std::string, Encoding> out;
  auto& [text, encoding] = out;
  for (size_t i = 0; i < ids.size(); ++i) {
    if (ids[i] < 0 || ids[i] >= vocab)
      throw Error("ids[" + std::to_string(i) + "] = " + std::to_string(ids[i]) + " is outside the vocabulary of " +
                  m.model->config().name + " (0.." + std::to_string(vocab - 1) + ")");
    Token t;
    t.id = int32_t(ids[i]);
    t.text = m.model->tokenizer().token_text(t.id);
    t.special = std::find(m.special_ids.begin(), m.special_ids.end(), t.id) != m.special_ids.end();
    encoding.tokens.push_back(std::move(t));
  }
  text = join_pieces(encoding);
  return out;
}

AnalyseOptions::Maps parse_maps(const std::string& maps) {
  if (const auto mode = maps_from_name(maps)) return *mode;
  std::string choices;
  const auto& names = maps_names();
  for (size_t i = 0; i < names.size(); ++i)
    choices += (i == 0 ? "\"" : i + 1 == names.size() ? " or \"" : ", \"") + names[i].first + "\"";
  throw Error("maps=\"" + maps + "\": choose " + choices);
}

CaptureOptions parse_capture(const std::vector<std::string>& names) {
  CaptureOptions c = CaptureOptions::attention_only();
  for (const std::string& n : names) {
    if (n == "attention")
      c.attention = true;
    else if (n == "head_outputs")
      c.head_outputs = true;
    else if (n == "contributions")
      c.contributions = true;
    else if (n == "hidden_states")
      c.hidden_states = true;
    else if (n == "queries" || n == "keys")
      c.queries_keys = true;
    else
      throw Error("capture: \"" + n +
                  "\" is not captured; choose from attention, head_outputs, contributions, "
                  "hidden_states, queries, keys");
  }
  return c;
}

// The evidence roles read beside a text's statistics: the cached corpus evidence (into
// options.corpus) and the probe to pass, measured once per model unless the cache holds it.
std::span<const analysis::ProbeEvidence> role_evidence(PyModel& m, bool use_probe, bool use_corpus,
                                                       AnalyseOptions& options) {
  if (use_corpus) {
    std::call_once(m.corpus_once, [&] {
      EvidenceOptions e;
      e.measure = false;  // the cache only, as `headscope run` without --measure-corpus
      m.corpus = corpus_evidence(*m.model, m.path, e);
    });
    options.corpus = m.corpus.heads;
  }
  // The cached corpus evidence holds the same probe (same lengths, count and seed), which
  // analyse() reads when it is given none: measuring it again would only cost the first run
  // of a model several seconds.
  const auto has_probe = [](const analysis::HeadEvidence& h) { return h.probe.has_value(); };
  const bool cached_probe =
      !options.corpus.empty() && std::all_of(options.corpus.begin(), options.corpus.end(), has_probe);
  if (!use_probe || cached_probe) return {};
  std::call_once(m.probe_once, [&] { m.probe = headscope::probe(*m.model); });
  return m.probe;
}

PyRun run(std::shared_ptr<PyModel> m, std::optional<nb::bytes> text_bytes, std::optional<std::vector<int64_t>> ids,
          const std::vector<std::string>& capture, bool words, const std::string& maps, bool truncate, bool use_probe,
          bool use_corpus) {
  AnalyseOptions options;
  options.capture = parse_capture(capture);
  options.maps = parse_maps(maps);
  std::string text;
  std::optional<std::pair<std::string, Encoding>> from_ids;
  if (text_bytes) {
    text.assign(text_bytes->c_str(), text_bytes->size());
    check_text_size(text);
  } else if (ids) {
    from_ids = encoding_of_ids(*m, *ids);
  }
  auto analysed = std::make_shared<RunAnalysis>();
  {
    nb::gil_scoped_release release;
    std::lock_guard lock(m->run_mutex);
    m->set_threads();
    Encoding encoding;
    if (from_ids) {
      text = std::move(from_ids->first);
      encoding = std::move(from_ids->second);
    } else {
      encoding = m->model->encode(text, truncate);
    }
    const std::span<const analysis::ProbeEvidence> probe = role_evidence(*m, use_probe, use_corpus, options);
    *analysed = analyse(*m->model, std::move(text), std::move(encoding), probe, options);
  }
  return PyRun{std::move(m), std::move(analysed), words ? Level::kWord : Level::kToken};
}

std::optional<ReadOnlyArray> capture_array(const PyRun& r, Tensor Capture::*field) {
  const Tensor& t = r.run->capture.*field;
  if (t.empty()) return std::nullopt;
  return view_of(t, r.run);
}

// The run as /api/run answers it (docs/schema.md): the pipeline's run_json plus what the server adds.
std::string run_json_text(const PyRun& r) {
  const nlohmann::json j = run_document(r.owner->model->config(), *r.run, r.level, /*hide_special=*/false,
                                        /*with_views=*/false);
  return j.dump();
}

Array tile(const PyRun& r, int layer, int head, int q0, int q1, int k0, int k1, const std::string& view) {
  if (view != "weights" && view != "norm")
    throw Error("tile: view='" + view +
                "'; give 'weights' or 'norm' (rollout has no tile: it needs every layer's whole maps)");
  Tensor t;
  {
    nb::gil_scoped_release release;
    std::lock_guard lock(r.owner->run_mutex);
    r.owner->set_threads();
    t = attention_tile(*r.owner->model, *r.run, layer, head, q0, q1, k0, k1, view == "norm");
  }
  return array_from(std::move(t));
}

nb::dict generate(std::shared_ptr<PyModel> m, nb::bytes prompt_bytes, int max_new_tokens, int64_t max_length,
                  bool stop_at_eos, bool capture_attention, std::optional<nb::callable> on_token) {
  std::string prompt(prompt_bytes.c_str(), prompt_bytes.size());
  check_text_size(prompt);
  if (max_new_tokens < 0) throw Error("max_new_tokens=" + std::to_string(max_new_tokens) + ": give 0 or more");
  GenerateOptions options;
  options.max_new_tokens = max_new_tokens;
  options.max_length = max_length;
  options.stop_at_eos = stop_at_eos;
  options.capture_attention = capture_attention;
  if (on_token)
    options.on_token = [&](const GeneratedToken& t, const std::vector<int32_t>&) {
      nb::gil_scoped_acquire acquire;
      (*on_token)(t.position, t.id, t.text, t.logit);
    };
  GenerationResult r;
  {
    nb::gil_scoped_release release;
    std::lock_guard lock(m->run_mutex);
    m->set_threads();
    const Encoding encoding = m->model->encode(prompt);
    r = describe_generation(*m->model, prompt, encoding, headscope::generate(*m->model, encoding, options),
                            /*check_retokenizes=*/false);
  }
  Generation& g = r.generation;
  nb::dict d;
  d["prompt_tokens"] = g.prompt_tokens;
  d["ids"] = g.ids;
  nb::list generated;
  for (const GeneratedToken& t : g.generated) generated.append(nb::make_tuple(t.position, t.id, t.text, t.logit));
  d["generated"] = generated;
  const std::string continuation = r.continuation + r.held_back;  // bytes: the tail is not held back here
  d["continuation"] = nb::bytes(continuation.data(), continuation.size());
  d["stopped_at_eos"] = g.stopped_at_eos;
  d["stopped_at_limit"] = g.stopped_at_limit;
  d["attention"] = g.attention.empty() ? nb::none() : nb::cast(array_from(std::move(g.attention)));
  return d;
}

// The atlas's data files under data_dir (docs/atlas.md) and its limits.
analysis::AtlasOptions atlas_options(const std::string& data_dir, int64_t max_sentences, int64_t max_gap_rows) {
  namespace fs = std::filesystem;
  analysis::AtlasOptions options;
  const fs::path data(data_dir);
  options.report_treebank = (data / "ud" / "en_pud-ud-test.conllu").string();
  options.select_treebank = (data / "ud" / "en_ewt-ud-dev.conllu").string();
  if (fs::exists(data / "gap" / "gap-validation.tsv")) {
    options.report_coref = (data / "gap" / "gap-validation.tsv").string();
    options.select_coref = (data / "gap" / "gap-development.tsv").string();
  }
  options.max_sentences = max_sentences;
  options.max_gap_rows = max_gap_rows;
  return options;
}

// The atlas's treebank and GAP stages over items [begin, end) of one stage ("report", "select",
// "coref_report", "coref_select"), as a partial's bytes (pipeline/atlas.h).
nb::bytes atlas_partial_of(std::shared_ptr<PyModel> m, const std::string& data_dir, int64_t max_sentences,
                           int64_t max_gap_rows, const std::string& stage, int64_t begin, int64_t end) {
  const analysis::AtlasOptions options = atlas_options(data_dir, max_sentences, max_gap_rows);
  AtlasShard shard;  // every stage empty but the one named
  shard.report_end = shard.select_end = shard.coref_report_end = shard.coref_select_end = 0;
  if (stage == "report")
    shard.report_begin = begin, shard.report_end = end;
  else if (stage == "select")
    shard.select_begin = begin, shard.select_end = end;
  else if (stage == "coref_report")
    shard.coref_report_begin = begin, shard.coref_report_end = end;
  else if (stage == "coref_select")
    shard.coref_select_begin = begin, shard.coref_select_end = end;
  else
    throw Error("atlas stage \"" + stage + "\": one of report, select, coref_report, coref_select");
  std::string bytes;
  {
    nb::gil_scoped_release release;
    std::lock_guard lock(m->run_mutex);
    m->set_threads();
    bytes = atlas_partial_bytes(*m->model, options, shard);
  }
  return nb::bytes(bytes.data(), bytes.size());
}

// Items per stage (report, select, coref_report, coref_select) of the atlas over data_dir.
std::vector<int64_t> atlas_sizes(const std::string& data_dir, int64_t max_sentences, int64_t max_gap_rows) {
  const std::array<int64_t, 4> sizes = atlas_stage_sizes(atlas_options(data_dir, max_sentences, max_gap_rows));
  return {sizes.begin(), sizes.end()};
}

// Partials merged (in any order: the result is the same), as bytes.
nb::bytes atlas_merge(const std::vector<nb::bytes>& parts) {
  std::vector<std::string> all;
  for (const nb::bytes& p : parts) all.emplace_back(p.c_str(), p.size());
  const std::string bytes = merge_atlas_partials(all);
  return nb::bytes(bytes.data(), bytes.size());
}

nb::dict atlas(std::shared_ptr<PyModel> m, const std::string& data_dir, int64_t max_sentences, int64_t max_gap_rows,
               int64_t importance_texts, std::optional<nb::callable> progress, nb::bytes partial) {
  analysis::AtlasOptions options = atlas_options(data_dir, max_sentences, max_gap_rows);
  options.importance_texts = importance_texts;
  options.partial_bytes.assign(partial.c_str(), partial.size());
  if (progress)
    options.progress = [&](std::string_view stage, int64_t done, int64_t total) {
      nb::gil_scoped_acquire acquire;
      (*progress)(std::string(stage), done, total);
    };
  AtlasFiles files;
  {
    nb::gil_scoped_release release;
    std::lock_guard lock(m->run_mutex);
    m->set_threads();
    LoadOptions load;
    files = make_atlas(m->path, "", options, "headscope.Model.atlas()", "atlas.png", load);
  }
  nb::dict d;
  d["json"] = files.json;
  d["markdown"] = files.markdown;
  d["png"] = nb::bytes(reinterpret_cast<const char*>(files.png.data()), files.png.size());
  d["seconds"] = files.seconds;
  return d;
}

// Causal results (docs/causal.md): the pipeline's results as the JSON the CLI and the server write.
std::vector<std::string> strings_of(const std::vector<nb::bytes>& texts) {
  std::vector<std::string> out;
  for (const nb::bytes& t : texts) {
    out.emplace_back(t.c_str(), t.size());
    check_text_size(out.back());
  }
  return out;
}

std::vector<Encoding> encode_all(const Model& model, const std::vector<std::string>& texts) {
  std::vector<Encoding> out;
  for (const std::string& t : texts) out.push_back(model.encode(t));
  return out;
}

std::string ablate(std::shared_ptr<PyModel> m, const std::vector<nb::bytes>& texts,
                   const std::vector<std::pair<int, int>>& heads, const std::string& mode,
                   const std::vector<nb::bytes>& reference, uint64_t seed) {
  const std::vector<std::string> items = strings_of(texts), donors = strings_of(reference);
  std::vector<HeadRef> refs;
  for (const auto& [layer, head] : heads) refs.push_back({layer, head});
  nb::gil_scoped_release release;
  std::lock_guard lock(m->run_mutex);
  m->set_threads();
  AblateOptions options;
  options.mode = parse_ablation_mode(mode);
  options.seed = seed;
  options.reference = encode_all(*m->model, donors);
  return nlohmann::json(Ablator(*m->model, encode_all(*m->model, items), std::move(options)).ablate(refs)).dump();
}

std::string importance(std::shared_ptr<PyModel> m, const std::vector<nb::bytes>& texts) {
  const std::vector<std::string> items = strings_of(texts);
  nb::gil_scoped_release release;
  std::lock_guard lock(m->run_mutex);
  m->set_threads();
  return nlohmann::json(measure_importance(Ablator(*m->model, encode_all(*m->model, items), {}))).dump();
}

// A float64 array that owns `values`, of the given shape.
nb::ndarray<nb::numpy, double, nb::c_contig> float64_array(std::vector<double>&& values, std::vector<size_t> shape) {
  auto* held = new std::vector<double>(std::move(values));
  nb::capsule owner(held, [](void* p) noexcept { delete static_cast<std::vector<double>*>(p); });
  return nb::ndarray<nb::numpy, double, nb::c_contig>(held->data(), shape.size(), shape.data(), owner);
}

// Importance in parts (pipeline.h, ImportanceParts): what a shard of texts returns to be merged.
nb::dict importance_parts(std::shared_ptr<PyModel> m, const std::vector<nb::bytes>& texts) {
  const std::vector<std::string> items = strings_of(texts);
  ImportanceParts parts;
  {
    nb::gil_scoped_release release;
    std::lock_guard lock(m->run_mutex);
    m->set_threads();
    parts = Ablator(*m->model, encode_all(*m->model, items), {}).importance_parts();
  }
  const size_t n = parts.texts(), N = size_t(parts.n_layer) * size_t(parts.n_head);
  nb::dict d;
  d["n_layer"] = parts.n_layer;
  d["n_head"] = parts.n_head;
  d["causal"] = parts.causal;
  d["tokens"] = parts.tokens;
  d["effect"] = float64_array(std::move(parts.effect), {n, N});
  d["proxy"] = float64_array(std::move(parts.proxy), {n, N});
  return d;
}

using Float64Rows = nb::ndarray<const double, nb::ndim<2>, nb::c_contig, nb::device::cpu>;

// Every head's importance from the parts of all the texts, in corpus order (importance_from_parts).
std::string importance_from_parts_json(int n_layer, int n_head, bool causal, Float64Rows effect, Float64Rows proxy,
                                       const std::vector<int64_t>& tokens) {
  ImportanceParts parts;
  parts.n_layer = n_layer, parts.n_head = n_head, parts.causal = causal;
  parts.tokens = tokens;
  const size_t N = size_t(n_layer) * size_t(n_head);
  if (effect.shape(0) != tokens.size() || proxy.shape(0) != tokens.size() || effect.shape(1) != N ||
      proxy.shape(1) != N)
    throw Error("importance parts: effect and proxy must be [texts, n_layer * n_head] = [" +
                std::to_string(tokens.size()) + ", " + std::to_string(N) + "]");
  parts.effect.assign(effect.data(), effect.data() + effect.size());
  parts.proxy.assign(proxy.data(), proxy.data() + proxy.size());
  return nlohmann::json(importance_from_parts(parts)).dump();
}

// ---- circuits: activation and path patching, prompt pairs, the logit lens (docs/python.md) ----

// A circuits error as Python says it: the CLI flag the core names for own pairs, as the keyword argument.
[[noreturn]] void rethrow_in_python_terms(const Error& e) {
  std::string message = e.what();
  const std::string flag = "(--pairs FILE)";
  if (const size_t at = message.find(flag); at != std::string::npos) message.replace(at, flag.size(), "(pairs=[...])");
  if (dynamic_cast<const ResourceError*>(&e) != nullptr) throw ResourceError(message, e.remedy());
  throw Error(message, e.remedy());
}

std::string string_of(const nb::bytes& b) { return std::string(b.c_str(), b.size()); }

// A sweep over `sites`: exact (resumed passes), attribution (first-order estimates, with edges) or both.
PatchExperiment sweep_experiment(const Model& model, PromptPairs& pairs, const std::vector<std::string>& sites,
                                 const std::string& direction, PatchMetric metric, const std::vector<int>& layers,
                                 const std::string& method, bool edges) {
  AttributionRequest r;
  r.sweeps.clear();
  for (const std::string& s : sites) r.sweeps.push_back(patch_sweep_from_name(s));
  if (r.sweeps.empty()) throw Error("sites: name at least one site (head, q, k, v, pattern, resid, attn, mlp, ...)");
  r.direction = direction.empty() ? PatchDirection::kDenoise : patch_direction_from_name(direction);
  r.metric = metric;
  r.layers = layers;
  r.edges = edges;
  if (method == "attribution" || method == "both") return run_attribution_patch(model, pairs, r, method == "both");
  if (method != "exact") throw Error("method: exact, attribution or both, not '" + method + "'");
  if (edges) throw Error("edges=True needs method='attribution' (or 'both')");
  PatchRequest exact;
  exact.sweeps = r.sweeps, exact.direction = r.direction, exact.metric = r.metric, exact.layers = r.layers;
  return run_patch_sweep(model, pairs, exact);
}

// `headscope patch` (tools/cli/patch_command.cc) with its options as arguments: the pairs one of three
// ways, then a sweep over sites, the heads patched together, or path patching from senders. Returns
// the experiment's JSON ("headscope.patch/1") and the pairs it ran, as the pairs file's JSON.
std::pair<std::string, std::string> patch(std::shared_ptr<PyModel> m, nb::bytes clean, nb::bytes corrupt,
                                          nb::bytes answer, nb::bytes wrong, const std::string& pairs_json,
                                          const std::string& pairs_name, const std::string& task, int n, int length,
                                          uint64_t seed, const std::vector<std::string>& sites,
                                          const std::string& direction, const std::string& metric,
                                          const std::vector<int>& layers, const std::string& heads,
                                          const std::string& senders, const std::string& receivers,
                                          const std::string& input, const std::string& method, bool edges) {
  PairSource source;
  source.clean = string_of(clean);
  source.corrupt = string_of(corrupt);
  source.answer = string_of(answer);
  source.wrong = string_of(wrong);
  for (const std::string* text : {&source.clean, &source.corrupt}) check_text_size(*text);
  source.pairs_json = pairs_json;
  source.pairs_name = pairs_name;
  source.task = task;
  source.n = n;
  source.length = length;
  source.seed = seed;
  if (!heads.empty() && !senders.empty())
    throw Error("heads= (patched together) and senders= (path patching) are two experiments; give one");
  if (!receivers.empty() && senders.empty()) throw Error("receivers= needs senders= (path patching)");
  nb::gil_scoped_release release;
  std::lock_guard lock(m->run_mutex);
  m->set_threads();
  try {
    const Model& model = *m->model;
    PromptPairs pairs = load_prompt_pairs(model, source);
    const PatchMetric chosen = metric.empty() ? (model.config().causal ? PatchMetric::kLogitDiff : PatchMetric::kCosine)
                                              : patch_metric_from_name(metric);
    PatchExperiment x;
    if (!heads.empty()) {
      const PatchDirection d = direction.empty() ? PatchDirection::kDenoise : patch_direction_from_name(direction);
      x = run_head_set_patch(model, pairs, parse_heads(heads, model.config()), d, chosen);
    } else if (!senders.empty()) {
      PathPatchRequest r;
      r.senders = parse_heads(senders, model.config());
      if (!receivers.empty()) r.receivers = parse_heads(receivers, model.config());
      r.input = path_input_from_name(input);
      r.direction = direction.empty() ? PatchDirection::kNoise : patch_direction_from_name(direction);
      r.metric = chosen;
      x = run_path_patch(model, pairs, r);
    } else {
      x = sweep_experiment(model, pairs, sites, direction, chosen, layers, method, edges);
    }
    return {nlohmann::json(x).dump(), prompt_pairs_to_json(pairs)};
  } catch (const Error& e) {
    rethrow_in_python_terms(e);
  }
}

// A sweep over one shard of a dataset of pairs, in parts (pipeline.h, patch_parts_to_bytes): (the
// parts as bytes, the model's description as JSON). `pairs_json`: a pairs document.
std::pair<nb::bytes, std::string> patch_parts(std::shared_ptr<PyModel> m, const std::string& pairs_json,
                                              const std::vector<std::string>& sites, const std::string& direction,
                                              const std::string& metric, const std::vector<int>& layers) {
  std::string bytes, model_json;
  {
    nb::gil_scoped_release release;
    std::lock_guard lock(m->run_mutex);
    m->set_threads();
    try {
      const Model& model = *m->model;
      PromptPairs pairs = prompt_pairs_from_json(pairs_json, "pairs");
      check_pairs(model, pairs);
      PatchRequest r;
      r.sweeps.clear();
      for (const std::string& site : sites) r.sweeps.push_back(patch_sweep_from_name(site));
      if (r.sweeps.empty())
        throw Error("sites: name at least one site (head, q, k, v, pattern, resid, attn, mlp, ...)");
      r.direction = direction.empty() ? PatchDirection::kDenoise : patch_direction_from_name(direction);
      r.metric = metric.empty() ? (model.config().causal ? PatchMetric::kLogitDiff : PatchMetric::kCosine)
                                : patch_metric_from_name(metric);
      r.layers = layers;
      bytes = patch_parts_to_bytes(patch_sweep_parts(model, pairs, r));
      model_json = nlohmann::json(model.config()).dump();
    } catch (const Error& e) {
      rethrow_in_python_terms(e);
    }
  }
  return {nb::bytes(bytes.data(), bytes.size()), model_json};
}

// The experiment ("headscope.patch/1") of every shard's parts, appended in dataset order; `model`:
// the description patch_parts gave.
std::string patch_from_parts(const std::string& model, const std::string& task, uint64_t seed,
                             const std::vector<nb::bytes>& shards, double wall) {
  if (shards.empty()) throw Error("patching: no parts to merge");
  PatchParts all = patch_parts_from_bytes(std::string_view(shards[0].c_str(), shards[0].size()));
  for (size_t i = 1; i < shards.size(); ++i)
    all.append(patch_parts_from_bytes(std::string_view(shards[i].c_str(), shards[i].size())));
  nlohmann::json j = patch_experiment_from_parts(ModelConfig{}, task, seed, all, {wall, 0.0});
  j["model"] = nlohmann::json::parse(model);  // the workers' model, as they described it
  return j.dump();
}

// A task's prompt pairs for the model (circuits.h's generators), as the pairs file's JSON.
std::string make_pairs(std::shared_ptr<PyModel> m, const std::string& task, int n, int length, uint64_t seed) {
  nb::gil_scoped_release release;
  std::lock_guard lock(m->run_mutex);
  try {
    PairSource source;
    source.task = task;
    source.n = n;
    source.length = length;
    source.seed = seed;
    return prompt_pairs_to_json(load_prompt_pairs(*m->model, source));
  } catch (const Error& e) {
    rethrow_in_python_terms(e);
  }
}

// A pairs file's JSON read and written again (every field present): refuses what --pairs refuses.
std::string read_pairs_json(const std::string& json, const std::string& source) {
  return prompt_pairs_to_json(prompt_pairs_from_json(json, source));
}

// Token ids from Python (int64) as the lenses take them: each within the model's vocabulary.
std::vector<int32_t> vocabulary_ids(const Model& model, const std::vector<int64_t>& ids) {
  std::vector<int32_t> out;
  for (size_t i = 0; i < ids.size(); ++i) {
    if (ids[i] < 0 || ids[i] >= model.config().vocab_size)
      throw Error("tokens[" + std::to_string(i) + "] = " + std::to_string(ids[i]) + " is outside the vocabulary of " +
                  model.config().name + " (0.." + std::to_string(model.config().vocab_size - 1) + ")");
    out.push_back(int32_t(ids[i]));
  }
  return out;
}

// The logit lens of one text (pipeline.h, text_logit_lens): the top tokens of every layer and the
// tracked tokens' logit, probability and rank, as flat lists the Python layer shapes into arrays;
// the whole [n_layer + 1, vocab] logits when asked for, moved into their array.
nb::dict logit_lens(std::shared_ptr<PyModel> m, nb::bytes text_bytes, int64_t position, int top_k,
                    const std::vector<int64_t>& ids, bool keep_logits, bool truncate) {
  const std::string text = string_of(text_bytes);
  check_text_size(text);
  TextLensOptions options;
  options.position = position;
  options.top_k = top_k;
  options.keep_logits = keep_logits;
  options.tokens = vocabulary_ids(*m->model, ids);
  TextLens lens;
  {
    nb::gil_scoped_release release;
    std::lock_guard lock(m->run_mutex);
    m->set_threads();
    lens = text_logit_lens(*m->model, m->model->encode(text, truncate), options);
  }
  std::vector<int32_t> top_ids;
  std::vector<float> top_logits, top_probs, token_logits, token_probs;
  std::vector<int64_t> top_ranks, token_ranks;
  for (int row = 0; row < lens.n_rows; ++row) {
    for (const LensToken& t : lens.top[size_t(row)]) {
      top_ids.push_back(t.id);
      top_logits.push_back(t.logit);
      top_probs.push_back(t.probability);
      top_ranks.push_back(t.rank);
    }
    for (const LensToken& t : lens.tokens[size_t(row)]) {
      token_logits.push_back(t.logit);
      token_probs.push_back(t.probability);
      token_ranks.push_back(t.rank);
    }
  }
  nb::dict d;
  d["encoding"] = encoding_tuple(lens.encoding);
  d["truncated"] = lens.encoding.truncated;
  d["position"] = lens.position;
  d["n_rows"] = lens.n_rows;
  d["vocab"] = lens.vocab;
  d["top_ids"] = top_ids;
  d["top_logits"] = top_logits;
  d["top_probs"] = top_probs;
  d["top_ranks"] = top_ranks;
  d["token_logits"] = token_logits;
  d["token_probs"] = token_probs;
  d["token_ranks"] = token_ranks;
  d["logits"] = lens.logits.empty() ? nb::none() : nb::cast(array_from(std::move(lens.logits)));
  return d;
}

// ---- gradients (docs/gradients.md) ----

PatchMetric metric_for(const Model& model, const std::string& metric) {
  if (!metric.empty()) return patch_metric_from_name(metric);
  return model.config().causal ? PatchMetric::kLogitDiff : PatchMetric::kCosine;
}

// `headscope grad`: the JSON ("headscope.grad/1") and every gradient as a float32 array, taken over.
std::pair<std::string, nb::dict> grad(std::shared_ptr<PyModel> m, nb::bytes text_bytes, const std::string& metric,
                                      nb::bytes answer, nb::bytes wrong, nb::bytes reference, bool attention, bool qkv,
                                      bool receivers) {
  const std::string text = string_of(text_bytes);
  check_text_size(text);
  TextGradients g;
  {
    nb::gil_scoped_release release;
    std::lock_guard lock(m->run_mutex);
    m->set_threads();
    GradientRequest r;
    r.metric = metric_for(*m->model, metric);
    r.answer = string_of(answer), r.wrong = string_of(wrong), r.reference = string_of(reference);
    r.attention = attention, r.queries_keys_values = qkv, r.receivers = receivers;
    g = text_gradients(*m->model, text, r);
  }
  std::string json = nlohmann::json(g).dump();
  nb::dict arrays;
  for (const auto& [name, t] : g.tensors()) arrays[name.c_str()] = array_from(Tensor(*t));
  arrays["token_embeddings"] = array_from(std::move(g.grads.token_embeddings));
  return {json, arrays};
}

// `headscope saliency`: the JSON ("headscope.saliency/1") and the attributions [T, d_model].
std::pair<std::string, Array> saliency_of(std::shared_ptr<PyModel> m, nb::bytes text_bytes, const std::string& method,
                                          const std::string& metric, nb::bytes answer, nb::bytes wrong,
                                          nb::bytes reference, int steps, const std::string& rule, int baseline,
                                          bool keep_special) {
  const std::string text = string_of(text_bytes);
  check_text_size(text);
  SaliencyExperiment x;
  {
    nb::gil_scoped_release release;
    std::lock_guard lock(m->run_mutex);
    m->set_threads();
    SaliencyRequest r;
    r.method = saliency_method_from_name(method);
    r.metric = metric_for(*m->model, metric);
    r.answer = string_of(answer), r.wrong = string_of(wrong), r.reference = string_of(reference);
    r.steps = steps, r.rule = integration_rule_from_name(rule), r.baseline_token = baseline;
    r.keep_special = keep_special;
    x = run_saliency(*m->model, text, r);
  }
  std::string json = nlohmann::json(x).dump();
  return {json, array_from(std::move(x.report.attributions))};
}

// One head's logit lens (pipeline.h, text_head_lens): its effect on every logit at one position, the
// tokens it raises and lowers most, and the followed tokens' effects and ranks.
nb::dict head_lens(std::shared_ptr<PyModel> m, nb::bytes text_bytes, int layer, int head, int64_t position, int top_k,
                   const std::vector<int64_t>& ids, bool truncate) {
  const std::string text = string_of(text_bytes);
  check_text_size(text);
  HeadLensOptions options;
  options.layer = layer, options.head = head, options.position = position, options.top_k = top_k;
  options.keep_logits = true;
  options.tokens = vocabulary_ids(*m->model, ids);
  HeadLens lens;
  {
    nb::gil_scoped_release release;
    std::lock_guard lock(m->run_mutex);
    m->set_threads();
    lens = text_head_lens(*m->model, m->model->encode(text, truncate), options);
  }
  nb::dict d;
  d["encoding"] = encoding_tuple(lens.encoding);
  d["truncated"] = lens.encoding.truncated;
  d["position"] = lens.position;
  d["kv_head"] = lens.kv_head;
  d["followed_prediction"] = lens.followed_prediction;
  for (const auto& [name, list] : {std::pair{"promoted", &lens.promoted}, std::pair{"suppressed", &lens.suppressed},
                                   std::pair{"token", &lens.tokens}}) {
    std::vector<int32_t> list_ids;
    std::vector<double> effects, model_logits;
    std::vector<int64_t> ranks;
    for (const HeadLensToken& t : *list) {
      list_ids.push_back(t.id);
      effects.push_back(t.logit);
      ranks.push_back(t.rank);
      model_logits.push_back(t.model_logit);
    }
    const std::string key(name);
    d[(key + "_ids").c_str()] = list_ids;
    d[(key + "_effects").c_str()] = effects;
    d[(key + "_ranks").c_str()] = ranks;
    d[(key + "_model_logits").c_str()] = model_logits;
  }
  auto* held = new std::vector<double>(std::move(lens.logits));
  nb::capsule owner(held, [](void* p) noexcept { delete static_cast<std::vector<double>*>(p); });
  const size_t shape[1] = {held->size()};
  d["effects"] = nb::ndarray<nb::numpy, double, nb::c_contig>(held->data(), 1, shape, owner);
  return d;
}

// ---- composition scores (docs/python.md, "Composition scores") ----

// One option set's scores, kept whole: the arrays are views of its tensors, and the ranking and the
// JSON are the core's (top_composition_pairs, composition_json), as for `headscope composition`.
struct PyComposition {
  std::shared_ptr<const CompositionScores> scores;
};

PyComposition composition(std::shared_ptr<PyModel> m, int draws, uint64_t seed, bool gains) {
  CompositionOptions options;
  options.baseline_draws = draws;
  options.seed = seed;
  options.fold_gains = gains;
  nb::gil_scoped_release release;
  std::lock_guard lock(m->run_mutex);  // every core, as a forward pass uses them
  m->set_threads();
  return {std::make_shared<const CompositionScores>(composition_scores(*m->model, options))};
}

CompositionKind composition_kind(const std::string& name) {
  for (const CompositionKind kind : kCompositionKinds)
    if (name == composition_kind_name(kind)) return kind;
  throw Error("kind \"" + name + "\" is not a kind of composition: give \"Q\", \"K\" or \"V\"");
}

// The n highest pairs of one kind as (sender layer, sender head, receiver layer, receiver head, score).
std::vector<std::tuple<int, int, int, int, double>> composition_top(const PyComposition& c, const std::string& kind,
                                                                    int n) {
  std::vector<std::tuple<int, int, int, int, double>> out;
  for (const CompositionPair& p : top_composition_pairs(*c.scores, composition_kind(kind), n))
    out.emplace_back(p.sender.layer, p.sender.head, p.receiver.layer, p.receiver.head, p.score);
  return out;
}

void register_composition(nb::module_& m) {
  nb::class_<PyComposition>(m, "Composition", "Composition scores (internal; see headscope.Composition).")
      .def_prop_ro(
          "q", [](const PyComposition& c) { return view_of(c.scores->q, c.scores); }, nb::rv_policy::reference)
      .def_prop_ro(
          "k", [](const PyComposition& c) { return view_of(c.scores->k, c.scores); }, nb::rv_policy::reference)
      .def_prop_ro(
          "v", [](const PyComposition& c) { return view_of(c.scores->v, c.scores); }, nb::rv_policy::reference)
      .def(
          "baseline",
          [](const PyComposition& c, const std::string& kind) {
            const CompositionBaseline& b = c.scores->baseline(composition_kind(kind));
            return std::pair<double, double>(b.mean, b.std);
          },
          "kind"_a, "(mean, std) of the kind's random baseline.")
      .def("top", &composition_top, "kind"_a, "n"_a,
           "The n highest pairs of a kind: (sender layer, sender head, receiver layer, receiver head, score).")
      .def(
          "json", [](const PyComposition& c, int top) { return composition_json(*c.scores, top).dump(); }, "top"_a,
          "`headscope composition --json`'s document (\"headscope.composition/1\") with `top` pairs per kind.")
      .def_prop_ro("options",
                   [](const PyComposition& c) {
                     const CompositionOptions& o = c.scores->options;
                     return std::tuple<int, uint64_t, bool>(o.baseline_draws, o.seed, o.fold_gains);
                   })
      .def_prop_ro("seconds", [](const PyComposition& c) {
        return std::tuple<double, double, double>(c.scores->seconds, c.scores->baseline_seconds, c.scores->cpu_seconds);
      });
}

// Checked here rather than converted: a float64 or strided array is a mistake worth naming.
void check_attention_array(const nb::ndarray<nb::ro, nb::device::cpu>& attention,
                           const std::vector<std::string>& tokens, const std::optional<std::vector<bool>>& special) {
  if (attention.dtype() != nb::dtype<float>())
    throw Error("analyse_attention: attention must be float32 (numpy.float32); convert it with .astype(numpy.float32)");
  if (attention.ndim() != 4)
    throw Error("analyse_attention: attention must have 4 axes [layer, head, q, k], got " +
                std::to_string(attention.ndim()));
  int64_t stride = 1;
  for (int i = 3; i >= 0; --i) {
    if (attention.shape(size_t(i)) > 1 && attention.stride(size_t(i)) != stride)
      throw Error("analyse_attention: attention must be C-contiguous; pass numpy.ascontiguousarray(attention)");
    stride *= int64_t(attention.shape(size_t(i)));
  }
  const int64_t L = int64_t(attention.shape(0)), H = int64_t(attention.shape(1)), T = int64_t(tokens.size());
  if (special && special->size() != tokens.size())
    throw Error("analyse_attention: special has " + std::to_string(special->size()) + " entries for " +
                std::to_string(tokens.size()) + " tokens; give one per token");
  if (int64_t(attention.shape(2)) != T || int64_t(attention.shape(3)) != T)
    throw Error("analyse_attention: attention is [" + std::to_string(L) + ", " + std::to_string(H) + ", " +
                std::to_string(attention.shape(2)) + ", " + std::to_string(attention.shape(3)) + "] but there are " +
                std::to_string(T) + " tokens; expected [layer, head, " + std::to_string(T) + ", " + std::to_string(T) +
                "]");
}

// Whether every weight above the diagonal of the [n, T, T] maps `a` is zero.
bool upper_triangle_zero(const float* a, int64_t n, int64_t T) {
  for (int64_t i = 0; i < n; ++i)
    for (int64_t q = 0; q < T; ++q)
      for (int64_t k = q + 1; k < T; ++k)
        if (a[(i * T + q) * T + k] != 0) return false;
  return true;
}

// Tokens as the text: joined by spaces, each its own word; equal strings share an id (duplicates).
std::pair<std::string, Encoding> encoding_of_tokens(const std::vector<std::string>& tokens,
                                                    const std::optional<std::vector<bool>>& special, int& vocab) {
  std::pair<std::string, Encoding> out;
  std::map<std::string, int32_t> id_of;
  for (size_t i = 0; i < tokens.size(); ++i) {
    Token t;
    t.text = tokens[i];
    t.id = id_of.try_emplace(tokens[i], int32_t(id_of.size())).first->second;
    t.special = special && (*special)[i];
    out.second.tokens.push_back(std::move(t));
  }
  out.first = join_pieces(out.second);
  vocab = int(id_of.size());
  return out;
}

std::string analyse_attention_json(nb::ndarray<nb::ro, nb::device::cpu> attention,
                                   const std::vector<std::string>& tokens, std::optional<std::vector<bool>> special,
                                   std::optional<bool> causal, bool words) {
  check_attention_array(attention, tokens, special);
  const int64_t L = int64_t(attention.shape(0)), H = int64_t(attention.shape(1)), T = int64_t(tokens.size());
  ModelConfig config;
  config.architecture = "external";
  config.name = "attention maps";
  config.n_layer = int(L);
  config.n_head = config.n_kv_head = int(H);
  config.max_positions = int(T);
  // Causal unless told: every weight above the diagonal is zero.
  const float* a = static_cast<const float*>(attention.data());
  config.causal = causal.value_or(T > 1 && upper_triangle_zero(a, L * H, T));
  auto [text, encoding] = encoding_of_tokens(tokens, special, config.vocab_size);
  Tensor maps({L, H, T, T}, Tensor::Uninitialized{});
  std::copy_n(a, maps.numel(), maps.ptr());
  nb::gil_scoped_release release;
  const RunAnalysis run = headscope::analyse_attention(config, std::move(text), std::move(encoding), std::move(maps));
  nlohmann::json j = run_json(config, run, words ? Level::kWord : Level::kToken);
  j["schema"] = "headscope.maps/1";
  j["streamed"] = false;
  return j.dump();
}

// The error's message with its remedy (headscope::Remedy) said as the keyword argument that asks
// for it (Model.run's truncate= and maps=); the memory budget is HEADSCOPE_MEMORY_BUDGET.
std::string error_message(const headscope::Error& e) {
  std::string message = e.what();
  switch (e.remedy()) {
    case Remedy::kNone:
      break;
    case Remedy::kTruncate:
      message += "; pass truncate=True to cut it";
      break;
    case Remedy::kStreamMaps:
      message += "; pass maps=\"stream\"";
      break;
    case Remedy::kDenseMaps:
      message += "; pass maps=\"dense\" (or analyse a shorter text)";
      break;
    case Remedy::kShorterText:
      message += "; shorten the text, or raise HEADSCOPE_MEMORY_BUDGET (bytes)";
      break;
  }
  return message;
}

// headscope.Error (a ValueError), headscope.FileError (also an OSError: the model path is not
// there), headscope.ResourceError (over a budget or the machine's memory).
// ---- corpus jobs (docs/corpus.md): many texts in packed passes, statistics as mergeable partials ----

struct PyCorpusStats {
  analysis::CorpusStats stats;
};

std::vector<CorpusText> corpus_texts(const std::vector<nb::bytes>& texts, const std::vector<std::string>& ids) {
  if (!ids.empty() && ids.size() != texts.size())
    throw Error(std::to_string(ids.size()) + " ids for " + std::to_string(texts.size()) + " texts; give one per text");
  std::vector<CorpusText> out;
  out.reserve(texts.size());
  for (size_t i = 0; i < texts.size(); ++i) {
    CorpusText t{ids.empty() ? std::to_string(i) : ids[i], std::string(texts[i].c_str(), texts[i].size()), ""};
    size_t bad = 0;
    if (t.text.size() > limits::kMaxPythonTextBytes)
      t.error = "the text is " + std::to_string(t.text.size()) + " bytes; at most " +
                std::to_string(limits::kMaxPythonTextBytes) + " are taken";
    else if (!is_valid_utf8(t.text, &bad))
      t.error = "the text is not valid UTF-8 (byte " + std::to_string(bad) + ")";
    out.push_back(std::move(t));
  }
  return out;
}

// Every text analysed in packed passes: (records as CSV or None, the partial statistics, the
// failures and the summary as JSON). `progress(done, total, failed)` after every pass, with the GIL.
nb::tuple corpus(std::shared_ptr<PyModel> m, const std::vector<nb::bytes>& texts, const std::vector<std::string>& ids,
                 bool records, bool words, int64_t batch_tokens, bool truncate, bool use_probe, bool use_corpus,
                 nb::object progress) {
  const std::vector<CorpusText> items = corpus_texts(texts, ids);
  const ModelConfig& c = m->model->config();
  auto stats = std::make_unique<PyCorpusStats>(PyCorpusStats{{c.name, c.n_layer, c.n_head, c.n_kv_head}});
  std::string csv = records ? corpus_csv_header() : "";
  CorpusSummary summary;
  {
    nb::gil_scoped_release release;
    std::lock_guard lock(m->run_mutex);
    m->set_threads();
    CorpusOptions o;
    o.batch_tokens = batch_tokens;
    o.truncate = truncate;
    if (!progress.is_none())
      o.progress = [&](const CorpusProgress& p) {
        nb::gil_scoped_acquire acquire;
        progress(p.done, p.total, p.failed);
      };
    const Level level = words ? Level::kWord : Level::kToken;
    const std::span<const analysis::ProbeEvidence> probe = role_evidence(*m, use_probe, use_corpus, o.analyse);
    summary = analyse_corpus(*m->model, items, probe, o, [&](size_t i, const CorpusText& t, const RunAnalysis& run) {
      if (records) csv += corpus_csv_rows(c, i, t.id, run, level);
      const LevelAnalysis& a = run.analysis(level);
      stats->stats.add(a.sums, a.stats, a.roles, run.T());
    });
  }
  nlohmann::json failures = nlohmann::json::array();
  for (const CorpusFailure& f : summary.failures)
    failures.push_back({{"text", f.index}, {"id", f.id}, {"error", f.error}});
  const CorpusProgress& p = summary.progress;
  const nlohmann::json done = {{"failures", failures}, {"texts", p.done},
                               {"failed", p.failed},   {"tokens", p.tokens},
                               {"seconds", p.seconds}, {"texts_per_second", p.texts_per_second()}};
  return nb::make_tuple(records ? nb::object(nb::str(csv.c_str(), csv.size())) : nb::none(),
                        nb::cast(stats.release(), nb::rv_policy::take_ownership), nb::str(done.dump().c_str()));
}

// Jobs over many texts: ablation, importance, the corpus job.
void register_corpus_jobs(nb::class_<PyModel>& model) {
  model
      .def("ablate", &ablate, "texts"_a, "heads"_a, "mode"_a, "reference"_a, "seed"_a,
           "The heads ablated together over the texts, as JSON (AblationResult, docs/causal.md).")
      .def("importance", &importance, "texts"_a,
           "Every head zero-ablated alone over the texts, ranked, as JSON (/api/importance's reply).")
      .def("importance_parts", &importance_parts, "texts"_a,
           "Every head zero-ablated alone, per text: {n_layer, n_head, causal, tokens, effect, proxy}.");
  model.def("corpus", &corpus, "texts"_a, "ids"_a, "records"_a, "words"_a, "batch_tokens"_a, "truncate"_a, "probe"_a,
            "corpus"_a, "progress"_a.none(),
            "Every text in packed passes: (records CSV or None, CorpusStats, summary JSON).");
}

void register_corpus(nb::module_& m) {
  m.def("atlas_sizes", &atlas_sizes, "data_dir"_a, "max_sentences"_a, "max_gap_rows"_a,
        "Items per atlas stage: (report, select, coref_report, coref_select).");
  m.def("atlas_merge", &atlas_merge, "parts"_a, "Atlas partials merged, as bytes.");
  m.def("patch_from_parts", &patch_from_parts, "model"_a, "task"_a, "seed"_a, "shards"_a, "wall"_a,
        "The sweep of every shard's patching parts, in dataset order, as JSON (headscope.patch/1).");
  m.def("importance_from_parts", &importance_from_parts_json, "n_layer"_a, "n_head"_a, "causal"_a, "effect"_a,
        "proxy"_a, "tokens"_a, "Every head's importance from the parts of all the texts, in corpus order, as JSON.");
  nb::class_<PyCorpusStats>(m, "CorpusStats", "Mergeable corpus statistics (internal; see headscope.CorpusStats).")
      .def_static(
          "from_bytes",
          [](nb::bytes b) {
            std::string bytes(b.c_str(), b.size());
            nb::gil_scoped_release release;
            return new PyCorpusStats{analysis::CorpusStats::from_bytes(bytes)};
          },
          "data"_a, nb::rv_policy::take_ownership, "A partial from to_bytes().")
      .def("to_bytes",
           [](const PyCorpusStats& s) {
             const std::string b = s.stats.to_bytes();
             return nb::bytes(b.data(), b.size());
           })
      .def(
          "merge", [](PyCorpusStats& s, const PyCorpusStats& o) { s.stats.merge(o.stats); }, "other"_a)
      .def("json", [](const PyCorpusStats& s) { return corpus_stats_json(s.stats).dump(); })
      .def(
          "equals", [](const PyCorpusStats& s, const PyCorpusStats& o) { return s.stats == o.stats; }, "other"_a)
      .def_prop_ro("texts", [](const PyCorpusStats& s) { return s.stats.texts(); })
      .def_prop_ro("tokens", [](const PyCorpusStats& s) { return s.stats.tokens(); })
      .def_prop_ro("model", [](const PyCorpusStats& s) { return s.stats.model(); });
}

void register_errors(nb::module_& m) {
  // Raw pointers, kept for the life of the process: a static nb::object would be released after
  // the interpreter has shut down.
  static PyObject* error_type = PyErr_NewExceptionWithDoc(
      "headscope.Error", "A headscope error: one line naming the file, key or argument and what to do.",
      PyExc_ValueError, nullptr);
  nb::object file_bases = nb::make_tuple(nb::handle(error_type), nb::handle(PyExc_OSError));
  static PyObject* file_error_type = PyErr_NewExceptionWithDoc(
      "headscope.FileError", "The model path does not exist or cannot be read.", file_bases.ptr(), nullptr);
  static PyObject* resource_error_type = PyErr_NewExceptionWithDoc(
      "headscope.ResourceError", "Well-formed input over a headscope budget or the machine's memory.", error_type,
      nullptr);
  m.attr("Error") = nb::handle(error_type);
  m.attr("FileError") = nb::handle(file_error_type);
  m.attr("ResourceError") = nb::handle(resource_error_type);
  nb::register_exception_translator([](const std::exception_ptr& p, void*) {
    try {
      std::rethrow_exception(p);
    } catch (const FileError& e) {
      PyErr_SetString(file_error_type, error_message(e).c_str());
    } catch (const headscope::ResourceError& e) {
      PyErr_SetString(resource_error_type, error_message(e).c_str());
    } catch (const headscope::Error& e) {
      PyErr_SetString(error_type, error_message(e).c_str());
    } catch (const std::bad_alloc&) {
      PyErr_SetString(resource_error_type, "not enough memory for this request; try a shorter text");
    }
  });
}

// The circuits methods of the loaded model: patching, prompt pairs, the logit lens.
void register_circuits(nb::class_<PyModel>& model) {
  model
      .def("patch", &patch, "clean"_a, "corrupt"_a, "answer"_a, "wrong"_a, "pairs_json"_a, "pairs_name"_a, "task"_a,
           "n"_a, "length"_a, "seed"_a, "sites"_a, "direction"_a, "metric"_a, "layers"_a, "heads"_a, "senders"_a,
           "receivers"_a, "input"_a, "method"_a, "edges"_a,
           "`headscope patch`: (the experiment as JSON \"headscope.patch/1\", the pairs it ran as JSON).")
      .def("patch_parts", &patch_parts, "pairs_json"_a, "sites"_a, "direction"_a, "metric"_a, "layers"_a,
           "A sweep over these pairs in parts: (bytes to merge with patch_from_parts, the model as JSON).")
      .def("make_pairs", &make_pairs, "task"_a, "n"_a, "length"_a, "seed"_a,
           "A task's prompt pairs for this model (ioi, induction, greater_than), as the pairs file's JSON.")
      .def(
          "lens_token_id",
          [](const PyModel& self, nb::bytes text) {
            const std::string s = string_of(text);
            nb::gil_scoped_release release;
            return headscope::lens_token_id(*self.model, s);
          },
          "text"_a, "The id of a token written as text; Error unless it is exactly one token.")
      .def("logit_lens", &logit_lens, "text"_a, "position"_a, "top_k"_a, "ids"_a, "logits"_a, "truncate"_a,
           "The logit lens of one text at one position (decoders).")
      .def("grad", &grad, "text"_a, "metric"_a, "answer"_a, "wrong"_a, "reference"_a, "attention"_a, "qkv"_a,
           "receivers"_a, "The gradients of a metric of one text (docs/gradients.md).")
      .def("saliency", &saliency_of, "text"_a, "method"_a, "metric"_a, "answer"_a, "wrong"_a, "reference"_a, "steps"_a,
           "rule"_a, "baseline"_a, "keep_special"_a, "Token saliency of one text (docs/gradients.md).")
      .def("head_lens", &head_lens, "text"_a, "layer"_a, "head"_a, "position"_a, "top_k"_a, "ids"_a, "truncate"_a,
           "One head's output read through the unembedding at one position (decoders).")
      .def("composition", &composition, "draws"_a, "seed"_a, "gains"_a,
           "Q-, K- and V-composition of every pair of heads from the weights (`headscope composition`).")
      .def(
          "head_map",
          [](const PyModel& self, const std::vector<std::string>& texts) {
            std::string out;
            {
              nb::gil_scoped_release release;
              out = headscope::head_map_json(headscope::head_map(*self.model, texts), self.model->config()).dump();
            }
            return out;
          },
          "texts"_a, "The head map over these texts (\"headscope.head_map/1\" JSON).");
}

// The loaded model: its description, tokenizer, and what runs on it.
void register_model(nb::module_& m) {
  nb::class_<PyModel> model(m, "Model", "A loaded model (internal; see headscope.Model).");
  model
      .def("description", &description_json,
           "The model's description as JSON: GET /api/model without the server's limits and corpus evidence.")
      .def_prop_ro("norm_eps", [](const PyModel& self) { return self.model->config().norm_eps; })
      .def_prop_ro("eos_token_id", [](const PyModel& self) { return self.model->config().eos_token_id; })
      .def_prop_ro("warnings", [](const PyModel& self) { return self.model->warnings(); })
      .def_prop_ro("path", [](const PyModel& self) { return self.path; })
      .def_prop_ro(
          "corpus_source",
          [](PyModel& self) {
            nb::gil_scoped_release release;
            std::call_once(self.corpus_once, [&] {
              headscope::EvidenceOptions e;
              e.measure = false;
              self.corpus = headscope::corpus_evidence(*self.model, self.path, e);
            });
            return self.corpus.heads.empty() ? std::string() : self.corpus.source;
          },
          "What the cached corpus evidence measured (\"\" when there is none).")
      .def(
          "encode",
          [](const PyModel& self, nb::bytes text, bool special_tokens) {
            std::string s(text.c_str(), text.size());
            check_text_size(s);
            headscope::EncodeOptions o;
            o.add_special_tokens = special_tokens;
            nb::gil_scoped_release release;
            return encoding_tuple(self.model->tokenizer().encode(s, o));
          },
          "text"_a, "special_tokens"_a = true,
          "(ids, tokens, offsets, special) of the UTF-8 bytes `text`, without a length limit.")
      .def(
          "decode",
          [](const PyModel& self, const std::vector<int64_t>& ids) {
            const int vocab = self.model->config().vocab_size;
            std::vector<int32_t> v;
            for (size_t i = 0; i < ids.size(); ++i) {
              if (ids[i] < 0 || ids[i] >= vocab)
                throw headscope::Error("ids[" + std::to_string(i) + "] = " + std::to_string(ids[i]) +
                                       " is outside the vocabulary (0.." + std::to_string(vocab - 1) + ")");
              v.push_back(int32_t(ids[i]));
            }
            const std::string s = self.model->tokenizer().decode(v);
            return nb::bytes(s.data(), s.size());
          },
          "ids"_a, "The UTF-8 bytes the ids stand for.")
      .def("run", &run, "text"_a.none(), "ids"_a.none(), "capture"_a, "words"_a, "maps"_a, "truncate"_a, "probe"_a,
           "corpus"_a, "Analyses a text (UTF-8 bytes) or a list of ids; returns a Run.")
      .def("generate", &generate, "prompt"_a, "max_new_tokens"_a, "max_length"_a, "stop_at_eos"_a,
           "capture_attention"_a, "on_token"_a.none(), "Greedy continuation of `prompt` (decoders).")
      .def("atlas", &atlas, "data_dir"_a, "max_sentences"_a, "max_gap_rows"_a, "importance_texts"_a,
           "progress"_a.none(), "partial"_a = nb::bytes(""),
           "The corpus atlas of this model (JSON, Markdown, PNG); `partial`: its data stages merged from shards.")
      .def("atlas_partial", &atlas_partial_of, "data_dir"_a, "max_sentences"_a, "max_gap_rows"_a, "stage"_a, "begin"_a,
           "end"_a, "The atlas's data stage over items [begin, end), as a partial's bytes.");
  register_circuits(model);
  register_corpus_jobs(model);
}

// One analysed text: its arrays (views of the capture), tokens and JSON.
void register_run(nb::module_& m) {
  nb::class_<PyRun>(m, "Run", "One analysed text (internal; see headscope.Result).")
      .def_prop_ro(
          "attention", [](const PyRun& r) { return capture_array(r, &headscope::Capture::attention); },
          nb::rv_policy::reference)
      .def_prop_ro(
          "head_outputs", [](const PyRun& r) { return capture_array(r, &headscope::Capture::head_outputs); },
          nb::rv_policy::reference)
      .def_prop_ro(
          "contributions", [](const PyRun& r) { return capture_array(r, &headscope::Capture::contributions); },
          nb::rv_policy::reference)
      .def_prop_ro(
          "hidden_states", [](const PyRun& r) { return capture_array(r, &headscope::Capture::hidden_states); },
          nb::rv_policy::reference)
      .def_prop_ro(
          "queries", [](const PyRun& r) { return capture_array(r, &headscope::Capture::queries); },
          nb::rv_policy::reference)
      .def_prop_ro(
          "keys", [](const PyRun& r) { return capture_array(r, &headscope::Capture::keys); }, nb::rv_policy::reference)
      .def_prop_ro(
          "value_norms", [](const PyRun& r) { return capture_array(r, &headscope::Capture::value_norms); },
          nb::rv_policy::reference)
      .def_prop_ro("streamed", [](const PyRun& r) { return r.run->streamed; })
      .def_prop_ro("text", [](const PyRun& r) { return nb::bytes(r.run->text.data(), r.run->text.size()); })
      .def_prop_ro("encoding", [](const PyRun& r) { return encoding_tuple(r.run->encoding); })
      .def_prop_ro("truncated", [](const PyRun& r) { return r.run->encoding.truncated; })
      .def("json", &run_json_text, "The run as /api/run returns it (docs/schema.md).")
      .def("tile", &tile, "layer"_a, "head"_a, "q0"_a, "q1"_a, "k0"_a, "k1"_a, "view"_a = "weights",
           "Exact attention rows q0..q1-1 over keys k0..k1-1 of one head: [q1 - q0, k1 - k0]; view 'norm': "
           "the norm-weighted shares of the same cells.");
}

// The module's functions: load, the catalogues and analyse_attention.
void register_functions(nb::module_& m) {
  m.def("load", &load, "path"_a, "threads"_a.none(), "strict"_a, "Loads a model directory or .gguf file.");
  m.def(
      "kernel_isa", []() -> std::string { return headscope::kernel_isa(); },
      "The instruction-set path of the hand-written kernels in this process (\"portable\", \"avx2\" or\n"
      "\"avx512\"): the best the CPU runs, lowered by HEADSCOPE_ISA.");
  m.def(
      "role_catalogue", []() -> std::string { return headscope::role_catalogue_json().dump(); },
      "The role catalogue as JSON: one object per role (id, name, colour, description), in the order\n"
      "GET /api/model lists them; the embedded views colour role badges from it.");
  m.def(
      "statistics_catalogue", []() -> std::string { return headscope::statistics_catalogue_json().dump(); },
      "The catalogue of per-head statistics as JSON: one object per HeadStats field (key, kind, label,\n"
      "unit, help, constants), as GET /api/model serves it under statistics_catalogue.");
  m.def("read_pairs", &read_pairs_json, "json"_a, "source"_a,
        "A prompt-pairs file's JSON checked and written again with every field (what --pairs reads).");
  m.def("analyse_attention", &analyse_attention_json, "attention"_a, "tokens"_a, "special"_a.none() = nb::none(),
        "causal"_a.none() = nb::none(), "words"_a = false,
        "Statistics and roles of attention maps computed elsewhere.\n\n"
        "attention: float32 [layer, head, q, k] (T x T, C order); tokens: T labels; special: T flags\n"
        "(template tokens such as [CLS], <s>), default none. causal: None infers it (all weights above\n"
        "the diagonal zero). Returns JSON shaped like /api/run's (schema \"headscope.maps/1\"): the\n"
        "same keys, with no probe (no induction or duplicate-token evidence), no corpus evidence and no\n"
        "value norms (sink_mass_norm null).");
}

}  // namespace
}  // namespace headscope::python

NB_MODULE(_core, m) {
  using namespace headscope::python;
  m.doc() = "headscope's C++ core (internal: use the headscope package, docs/python.md)";
  register_errors(m);
  register_composition(m);
  register_corpus(m);
  register_model(m);
  register_run(m);
  register_functions(m);
}
