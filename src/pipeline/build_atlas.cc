// headscope pipeline — build_atlas(): the stages listed in analysis/atlas.h run through the
// model, their evidence joined into roles by the analysis (see atlas.h).
#include "pipeline/atlas.h"

#include <algorithm>
#include <chrono>
#include <fstream>
#include <functional>
#include <nlohmann/json.hpp>
#include <sstream>

#include "analysis/words.h"
#include "headscope/error.h"
#include "headscope/input.h"
#include "headscope/limits.h"
#include "pipeline/probe.h"
#include "pipeline/stream.h"

namespace headscope {

using analysis::AtlasOptions;
using analysis::AtlasResult;
using analysis::CorefScorer;
using analysis::DependencyScorer;
using analysis::DependencySentence;
using analysis::describe_sequence;
using analysis::describe_units;
using analysis::GapExample;
using analysis::HeadEvidence;
using analysis::HeadStream;
using analysis::join_evidence;
using analysis::join_words;
using analysis::make_head_streams;
using analysis::make_stream_plan;
using analysis::merge_attention;
using analysis::ModelStatsAccumulator;
using analysis::ProbeEvidence;
using analysis::read_conllu;
using analysis::read_gap_tsv;
using analysis::SequenceInfo;
using analysis::StreamPlan;
using analysis::summarise_coref;
using analysis::TextRoles;
using analysis::WordMap;
using analysis::words_from_encoding;
using analysis::words_from_spans;

namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

std::vector<std::string> read_corpus(const std::string& path) {
  std::string contents;
  try {
    contents = read_input_file(path, "corpus", limits::kMaxGoldFileBytes);
  } catch (const NotAFileError&) {
    throw;
  } catch (const ResourceError&) {
    throw;
  } catch (const Error&) {
    throw Error("corpus '" + path + "': cannot open it; pass a text file with one text per line");
  }
  std::istringstream in(contents);
  std::vector<std::string> lines;
  std::string line;
  while (std::getline(in, line)) {
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (line.find_first_not_of(" \t") != std::string::npos) lines.push_back(line);
  }
  if (lines.empty()) throw Error("corpus '" + path + "': no non-empty lines");
  return lines;
}

// The packed passes of the treebank and GAP stages: rows (tokens) and texts per pass. A pass's
// activations grow with its rows, its attention maps with Σ T² (a few MiB for sentences).
constexpr int64_t kAtlasBatchTokens = 2048;
constexpr size_t kAtlasBatchTexts = 128;

// The items of a stage, run through packed passes of up to kAtlasBatchTokens tokens (Model::run_batch:
// each item's capture is the one its own run records, to float rounding) and scored one by one in the
// order they were added, so every sum runs in the order of an item-at-a-time build.
template <class Item>
class PackedPasses {
 public:
  using Score = std::function<void(Item&, const Encoding&, const Capture&)>;
  PackedPasses(const Model& model, const CaptureOptions& capture, Score score)
      : model_(model), capture_(capture), score_(std::move(score)) {}
  void add(Item item, Encoding encoding) {
    const int64_t T = static_cast<int64_t>(encoding.size());
    if (!items_.empty() && (rows_ + T > kAtlasBatchTokens || items_.size() >= kAtlasBatchTexts)) flush();
    rows_ += T;
    items_.push_back(std::move(item));
    encodings_.push_back(std::move(encoding));
  }
  void flush() {
    if (items_.empty()) return;
    const std::vector<Capture> caps = model_.run_batch(encodings_, {&capture_, 1});
    for (size_t j = 0; j < items_.size(); ++j) score_(items_[j], encodings_[j], caps[j]);
    items_.clear(), encodings_.clear(), rows_ = 0;
  }

 private:
  const Model& model_;
  const CaptureOptions& capture_;
  Score score_;
  std::vector<Item> items_;
  std::vector<Encoding> encodings_;
  int64_t rows_ = 0;
};

// Encodes without truncation; returns false (and the caller skips the text) when the text is too
// long for the model or has nothing to encode.
bool encode_whole(const Model& model, const std::string& text, Encoding& out) {
  try {
    out = model.encode(text, /*truncate=*/true);
  } catch (const Error&) {
    return false;
  }
  return !out.truncated;
}

}  // namespace

namespace {

// The data files of an atlas, read first so that a wrong path fails before minutes of work.
struct AtlasData {
  std::vector<DependencySentence> report_tb, select_tb;
  std::vector<GapExample> report_gap, select_gap;
  std::vector<std::string> corpus;
};

AtlasData read_atlas_data(const AtlasOptions& options) {
  if (options.report_treebank.empty()) throw Error("atlas: no report treebank given (a CoNLL-U file is required)");
  const bool given = !options.evidence.empty();
  AtlasData d;
  d.report_tb = read_conllu(options.report_treebank);
  if (!options.select_treebank.empty()) d.select_tb = read_conllu(options.select_treebank);
  if (!given && !options.report_coref.empty()) d.report_gap = read_gap_tsv(options.report_coref);
  if (!given && !options.select_coref.empty()) d.select_gap = read_gap_tsv(options.select_coref);
  if (!options.corpus.empty()) d.corpus = read_corpus(options.corpus);
  auto keep_first = [](auto& rows, int64_t n) {
    if (n > 0 && rows.size() > static_cast<size_t>(n)) rows.resize(static_cast<size_t>(n));
  };
  keep_first(d.report_tb, options.max_sentences);
  keep_first(d.select_tb, options.max_sentences);
  keep_first(d.report_gap, options.max_gap_rows);
  keep_first(d.select_gap, options.max_gap_rows);
  return d;
}

// [begin, end) of n items, end −1 meaning n, clamped to the items.
std::pair<size_t, size_t> range_of(int64_t begin, int64_t end, size_t n) {
  const size_t b = std::min(n, static_cast<size_t>(std::max<int64_t>(begin, 0)));
  const size_t e = end < 0 ? n : std::min(n, static_cast<size_t>(end));
  return {b, std::max(b, e)};
}

CaptureOptions atlas_capture() {
  CaptureOptions capture = CaptureOptions::attention_only();
  capture.value_norms = true;  // [L, H, T]: the norm-weighted sink share (sink_mass_norm) of every head
  return capture;
}

// The treebank and GAP stages over a shard of the data.
AtlasPartial run_data_stages(const Model& model, const AtlasOptions& options, const AtlasData& data,
                             const AtlasShard& shard) {
  const ModelConfig& c = model.config();
  const int N = c.n_layer * c.n_head;
  const CaptureOptions capture = atlas_capture();
  auto progress = [&](std::string_view stage, int64_t done, int64_t total) {
    if (options.progress) options.progress(stage, done, total);
  };
  AtlasPartial p(c);
  auto add_stats = [&](const Capture& cap, const Encoding& enc, const std::string& text, const WordMap& map,
                       const Tensor& units) {
    const SequenceInfo seq = describe_sequence(enc, text, c.causal);
    p.token_stats.add(cap.attention, seq, cap.value_norms);
    if (c.causal) {  // the rows without the sink, through the head streams as analyse() reads them
      const StreamPlan plan = make_stream_plan(seq, map, /*without_specials=*/false, 1, c.window);
      std::vector<HeadStream> heads = make_head_streams(plan, N, c.window);
      feed_stored(heads, cap.attention, cap.value_norms);
      for (int h = 0; h < N; ++h) p.token_free_stats.merge_head(size_t(h), heads[size_t(h)].token_free);
    }
    p.word_stats.add(units, describe_units(seq, map));
    ++p.texts;
    p.tokens += static_cast<int64_t>(enc.size());
  };

  // ---- syntax (and, without a corpus, the statistics) on the treebanks (packed passes) ----
  struct Sentence {
    size_t index = 0;
    std::string text;
    std::vector<std::pair<int64_t, int64_t>> spans;
  };
  auto score_treebank = [&](const std::vector<DependencySentence>& tb, size_t begin, size_t end,
                            DependencyScorer& scorer, bool with_stats, std::string_view stage, int64_t& counted) {
    const auto t0 = Clock::now();
    PackedPasses<Sentence> passes(model, capture, [&](Sentence& s, const Encoding& enc, const Capture& cap) {
      const WordMap map = words_from_spans(enc, s.spans);
      const Tensor units = merge_attention(cap.attention, map);  // [L, H, U, U]
      scorer.add(tb[s.index], units.ptr(), map);
      ++counted;
      if (with_stats) add_stats(cap, enc, s.text, map, units);
      progress(stage, static_cast<int64_t>(s.index - begin + 1), static_cast<int64_t>(end - begin));
    });
    Encoding enc;
    for (size_t i = begin; i < end; ++i) {
      Sentence s{i, {}, {}};
      s.text = join_words(tb[i], &s.spans);
      if (encode_whole(model, s.text, enc))
        passes.add(std::move(s), std::move(enc));
      else
        ++p.skipped_sentences;
    }
    passes.flush();
    progress(stage, static_cast<int64_t>(end - begin), static_cast<int64_t>(end - begin));
    p.seconds.emplace_back(std::string(stage), seconds_since(t0));
  };
  const auto [rb, re] = range_of(shard.report_begin, shard.report_end, data.report_tb.size());
  score_treebank(data.report_tb, rb, re, p.report, data.corpus.empty(), "treebank (report)", p.report_sentences);
  if (!data.select_tb.empty()) {
    const auto [sb, se] = range_of(shard.select_begin, shard.select_end, data.select_tb.size());
    score_treebank(data.select_tb, sb, se, p.select, false, "treebank (select)", p.select_sentences);
  }

  // ---- coreference (packed passes) ----
  auto score_gap = [&](const std::vector<GapExample>& examples, size_t begin, size_t end, CorefScorer& scorer,
                       std::string_view stage) {
    const auto t0 = Clock::now();
    PackedPasses<size_t> passes(model, capture, [&](size_t& i, const Encoding& enc, const Capture& cap) {
      scorer.add(examples[i], enc, cap.attention);
      progress(stage, static_cast<int64_t>(i - begin + 1), static_cast<int64_t>(end - begin));
    });
    for (size_t i = begin; i < end; ++i) {
      if (!examples[i].decidable()) continue;
      Encoding enc;
      try {
        // Truncation is harmless here: an example whose mentions were cut off is skipped by the scorer.
        enc = model.encode(examples[i].text, /*truncate=*/true);
      } catch (const Error&) {
        continue;
      }
      if (enc.size() > 0) passes.add(i, std::move(enc));
    }
    passes.flush();
    progress(stage, static_cast<int64_t>(end - begin), static_cast<int64_t>(end - begin));
    p.seconds.emplace_back(std::string(stage), seconds_since(t0));
  };
  if (!data.report_gap.empty()) {
    const auto [gb, ge] = range_of(shard.coref_report_begin, shard.coref_report_end, data.report_gap.size());
    score_gap(data.report_gap, gb, ge, p.coref_report, "coreference (report)");
    if (!data.select_gap.empty()) {
      const auto [hb, he] = range_of(shard.coref_select_begin, shard.coref_select_end, data.select_gap.size());
      score_gap(data.select_gap, hb, he, p.coref_select, "coreference (select)");
    }
  }
  return p;
}

}  // namespace

AtlasResult build_atlas(const Model& model, const std::string& model_path, const AtlasOptions& options) {
  const auto t_start = Clock::now();
  const ModelConfig& c = model.config();
  const int L = c.n_layer, H = c.n_head, N = L * H;
  const CaptureOptions capture = atlas_capture();
  auto progress = [&](std::string_view stage, int64_t done, int64_t total) {
    if (options.progress) options.progress(stage, done, total);
  };
  const bool given = !options.evidence.empty();
  if (given && options.evidence.size() != static_cast<size_t>(N))
    throw Error("atlas: the evidence given has " + std::to_string(options.evidence.size()) + " heads; the model has " +
                std::to_string(N));

  AtlasResult r;
  r.config = c;
  r.model_path = model_path;
  r.options = options;
  r.options.progress = nullptr;
  r.options.partial_bytes.clear();

  const AtlasData data = read_atlas_data(options);
  AtlasPartial p = options.partial_bytes.empty() ? run_data_stages(model, options, data, AtlasShard{})
                                                 : atlas_partial_from_bytes(options.partial_bytes);
  if (p.n_layer != L || p.n_head != H)
    throw Error("atlas: the partial given counts " + std::to_string(p.n_layer) + " x " + std::to_string(p.n_head) +
                " heads; " + c.name + " has " + std::to_string(L) + " x " + std::to_string(H));
  r.report_sentences = p.report_sentences;
  r.skipped_sentences = p.skipped_sentences;
  r.corpus_texts = p.texts;
  r.corpus_tokens = p.tokens;
  r.seconds_per_stage = p.seconds;
  const bool own_select = !data.select_tb.empty();
  r.select_sentences = own_select ? p.select_sentences : p.report_sentences;
  const DependencyScorer& select_scorer = own_select ? p.select : p.report;
  const DependencyScorer& report_scorer = p.report;
  ModelStatsAccumulator& token_stats = p.token_stats;
  ModelStatsAccumulator& word_stats = p.word_stats;
  ModelStatsAccumulator& token_free_stats = p.token_free_stats;
  const std::vector<std::string>& corpus = data.corpus;

  // ---- statistics over a separate corpus ----
  // Texts of up to kAtlasBatchTokens tokens go through packed passes and their stored maps into the
  // head streams; a longer one is streamed through its own pass (no [T, T] map stored), after the
  // passes before it, so the texts are counted (and text_roles listed) in file order.
  if (!corpus.empty()) {
    const auto t0 = Clock::now();
    auto count_text = [&](size_t i, const Encoding& enc, const std::vector<HeadStream>& heads) {
      for (int h = 0; h < N; ++h) {
        token_stats.merge_head(size_t(h), heads[size_t(h)].token);
        word_stats.merge_head(size_t(h), heads[size_t(h)].word);
        if (c.causal) token_free_stats.merge_head(size_t(h), heads[size_t(h)].token_free);
      }
      if (options.text_roles) {
        TextRoles& t = r.texts.emplace_back();
        t.text = corpus[i];
        for (const HeadStream& h : heads) t.stats.push_back(h.token.result());
        if (c.causal)
          for (const HeadStream& h : heads) t.free_stats.push_back(h.token_free.result());
      }
      ++r.corpus_texts;
      r.corpus_tokens += static_cast<int64_t>(enc.size());
      progress("corpus", static_cast<int64_t>(i + 1), static_cast<int64_t>(corpus.size()));
    };
    auto plan_of = [&](size_t i, const Encoding& enc) {  // the head streams read it: keep it while they run
      return make_stream_plan(describe_sequence(enc, corpus[i], c.causal), words_from_encoding(enc),
                              /*without_specials=*/false, 1, c.window);
    };
    PackedPasses<size_t> passes(model, capture, [&](size_t& i, const Encoding& enc, const Capture& cap) {
      const StreamPlan plan = plan_of(i, enc);
      std::vector<HeadStream> heads = make_head_streams(plan, N, c.window);
      feed_stored(heads, cap.attention, cap.value_norms);
      count_text(i, enc, heads);
    });
    Encoding enc;
    for (size_t i = 0; i < corpus.size(); ++i) {
      if (!encode_whole(model, corpus[i], enc)) {
        ++r.skipped_texts;
        progress("corpus", static_cast<int64_t>(i + 1), static_cast<int64_t>(corpus.size()));
      } else if (static_cast<int64_t>(enc.size()) <= kAtlasBatchTokens) {
        passes.add(i, std::move(enc));
      } else {
        passes.flush();
        const StreamPlan plan = plan_of(i, enc);
        std::vector<HeadStream> heads = make_head_streams(plan, N, c.window);
        run_streamed(model, enc, heads, capture);
        count_text(i, enc, heads);
      }
    }
    passes.flush();
    progress("corpus", static_cast<int64_t>(corpus.size()), static_cast<int64_t>(corpus.size()));
    r.seconds_per_stage.emplace_back("corpus", seconds_since(t0));
  }
  r.stats = token_stats.result();
  r.word_stats = word_stats.result();
  if (c.causal) r.free_stats = token_free_stats.result();

  // ---- induction / duplicate probe ----
  if (given) {
    for (const HeadEvidence& e : options.evidence) r.probe.push_back(e.probe.value_or(ProbeEvidence{}));
  } else {
    const auto t0 = Clock::now();
    r.probe = measure_probe(model, options.probe_length, options.probe_count, options.seed,
                            [&](int done) { progress("probe", done, options.probe_count); });
    r.seconds_per_stage.emplace_back("probe", seconds_since(t0));
  }

  // ---- coreference ----
  if (!data.report_gap.empty()) {
    const CorefScorer& select = data.select_gap.empty() ? p.coref_report : p.coref_select;
    r.coref = summarise_coref(select, p.coref_report, N);
  }

  // ---- relations and roles ----
  join_evidence(r, select_scorer, report_scorer);
  r.seconds_total = seconds_since(t_start);
  return r;
}

// ---- an atlas's data stages in shards ----

AtlasPartial::AtlasPartial(const ModelConfig& config)
    : n_layer(config.n_layer),
      n_head(config.n_head),
      report(config.n_layer * config.n_head),
      select(config.n_layer * config.n_head),
      coref_report(config.n_layer * config.n_head),
      coref_select(config.n_layer * config.n_head),
      token_stats(config.n_layer, config.n_head, config.window),
      word_stats(config.n_layer, config.n_head),
      token_free_stats(config.n_layer, config.n_head, config.window) {}

void AtlasPartial::merge(const AtlasPartial& o) {
  if (o.n_layer != n_layer || o.n_head != n_head)
    throw Error("atlas: cannot merge a partial of " + std::to_string(o.n_layer) + " x " + std::to_string(o.n_head) +
                " heads into one of " + std::to_string(n_layer) + " x " + std::to_string(n_head));
  report.merge(o.report);
  select.merge(o.select);
  coref_report.merge(o.coref_report);
  coref_select.merge(o.coref_select);
  token_stats.merge(o.token_stats);
  word_stats.merge(o.word_stats);
  token_free_stats.merge(o.token_free_stats);
  report_sentences += o.report_sentences, select_sentences += o.select_sentences;
  skipped_sentences += o.skipped_sentences, texts += o.texts, tokens += o.tokens;
  for (const auto& stage : o.seconds) {
    auto it = std::find_if(seconds.begin(), seconds.end(), [&](const auto& s) { return s.first == stage.first; });
    if (it == seconds.end())
      seconds.push_back(stage);
    else
      it->second += stage.second;
  }
}

AtlasPartial atlas_partial(const Model& model, const AtlasOptions& options, const AtlasShard& shard) {
  return run_data_stages(model, options, read_atlas_data(options), shard);
}

std::string atlas_partial_bytes(const Model& model, const AtlasOptions& options, const AtlasShard& shard) {
  return atlas_partial_to_bytes(atlas_partial(model, options, shard));
}

std::string merge_atlas_partials(const std::vector<std::string>& parts) {
  if (parts.empty()) throw Error("atlas: no partial to merge");
  AtlasPartial all = atlas_partial_from_bytes(parts[0]);
  for (size_t i = 1; i < parts.size(); ++i) all.merge(atlas_partial_from_bytes(parts[i]));
  return atlas_partial_to_bytes(all);
}

std::array<int64_t, 4> atlas_stage_sizes(const AtlasOptions& options) {
  const AtlasData d = read_atlas_data(options);
  return {int64_t(d.report_tb.size()), int64_t(d.select_tb.size()), int64_t(d.report_gap.size()),
          int64_t(d.select_gap.size())};
}

namespace {
constexpr const char* kPartialSchema = "headscope.atlas_partial/2";
}

std::string atlas_partial_to_bytes(const AtlasPartial& p) {
  nlohmann::json seconds = nlohmann::json::array();
  for (const auto& s : p.seconds) seconds.push_back({s.first, s.second});
  const nlohmann::json j = {
      {"schema", kPartialSchema},
      {"n_layer", p.n_layer},
      {"n_head", p.n_head},
      {"window", p.token_stats.layer_window()},
      {"report", p.report.to_json()},
      {"select", p.select.to_json()},
      {"coref_report", p.coref_report.to_json()},
      {"coref_select", p.coref_select.to_json()},
      {"token_stats", p.token_stats.to_json()},
      {"word_stats", p.word_stats.to_json()},
      {"token_free_stats", p.token_free_stats.to_json()},
      {"counts", {p.report_sentences, p.select_sentences, p.skipped_sentences, p.texts, p.tokens}},
      {"seconds", std::move(seconds)}};
  const std::vector<uint8_t> cbor = nlohmann::json::to_cbor(j);
  return {cbor.begin(), cbor.end()};
}

AtlasPartial atlas_partial_from_bytes(std::string_view bytes) {
  try {
    const nlohmann::json j = nlohmann::json::from_cbor(bytes.begin(), bytes.end());
    if (j.at("schema") != kPartialSchema) throw Error(std::string("not ") + kPartialSchema);
    ModelConfig c;
    c.n_layer = j.at("n_layer").get<int>();
    c.n_head = j.at("n_head").get<int>();
    c.window = j.at("window").get<std::vector<int64_t>>();
    AtlasPartial p(c);
    const int N = c.n_layer * c.n_head;
    p.report = DependencyScorer::from_json(j.at("report"));
    p.select = DependencyScorer::from_json(j.at("select"));
    p.coref_report = CorefScorer::from_json(j.at("coref_report"));
    p.coref_select = CorefScorer::from_json(j.at("coref_select"));
    for (const int n : {p.report.n_heads(), p.select.n_heads(), p.coref_report.n_heads(), p.coref_select.n_heads()})
      if (n != N) throw Error("a scorer counts " + std::to_string(n) + " heads, not " + std::to_string(N));
    p.token_stats.from_json(j.at("token_stats"));
    p.word_stats.from_json(j.at("word_stats"));
    p.token_free_stats.from_json(j.at("token_free_stats"));
    const auto counts = j.at("counts").get<std::vector<int64_t>>();
    if (counts.size() != 5) throw Error("counts");
    p.report_sentences = counts[0], p.select_sentences = counts[1], p.skipped_sentences = counts[2];
    p.texts = counts[3], p.tokens = counts[4];
    for (const nlohmann::json& s : j.at("seconds"))
      p.seconds.emplace_back(s.at(0).get<std::string>(), s.at(1).get<double>());
    return p;
  } catch (const std::exception& e) {
    throw Error(std::string("atlas: these bytes are not an atlas partial (") + e.what() + ")");
  }
}

}  // namespace headscope
