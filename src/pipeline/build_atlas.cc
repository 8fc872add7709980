// headscope pipeline — build_atlas(): the stages listed in analysis/atlas.h run through the
// model, their evidence joined into roles by the analysis (see atlas.h).
#include "pipeline/atlas.h"

#include <algorithm>
#include <chrono>
#include <fstream>
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

// The packed passes of the treebank stages: rows (tokens) and sentences per pass. A pass's
// activations grow with its rows, its attention maps with Σ T² (a few MiB for sentences).
constexpr int64_t kAtlasBatchTokens = 2048;
constexpr size_t kAtlasBatchTexts = 128;

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

AtlasResult build_atlas(const Model& model, const std::string& model_path, const AtlasOptions& options) {
  const auto t_start = Clock::now();
  const ModelConfig& c = model.config();
  const int L = c.n_layer, H = c.n_head, N = L * H;
  CaptureOptions capture = CaptureOptions::attention_only();
  capture.value_norms = true;  // [L, H, T]: the norm-weighted sink share (sink_mass_norm) of every head
  auto progress = [&](std::string_view stage, int64_t done, int64_t total) {
    if (options.progress) options.progress(stage, done, total);
  };
  if (options.report_treebank.empty()) throw Error("atlas: no report treebank given (a CoNLL-U file is required)");
  const bool given = !options.evidence.empty();
  if (given && options.evidence.size() != static_cast<size_t>(N))
    throw Error("atlas: the evidence given has " + std::to_string(options.evidence.size()) + " heads; the model has " +
                std::to_string(N));

  AtlasResult r;
  r.config = c;
  r.model_path = model_path;
  r.options = options;
  r.options.progress = nullptr;

  // Read every data file first, so that a wrong path fails before minutes of work.
  auto report_tb = read_conllu(options.report_treebank);
  std::vector<DependencySentence> select_tb;
  if (!options.select_treebank.empty()) select_tb = read_conllu(options.select_treebank);
  std::vector<GapExample> report_gap, select_gap;
  if (!given && !options.report_coref.empty()) report_gap = read_gap_tsv(options.report_coref);
  if (!given && !options.select_coref.empty()) select_gap = read_gap_tsv(options.select_coref);
  std::vector<std::string> corpus;
  if (!options.corpus.empty()) corpus = read_corpus(options.corpus);
  auto keep_first = [](auto& rows, int64_t n) {
    if (n > 0 && rows.size() > static_cast<size_t>(n)) rows.resize(static_cast<size_t>(n));
  };
  keep_first(report_tb, options.max_sentences);
  keep_first(select_tb, options.max_sentences);
  keep_first(report_gap, options.max_gap_rows);
  keep_first(select_gap, options.max_gap_rows);

  ModelStatsAccumulator token_stats(L, H, c.window), word_stats(L, H);
  auto add_stats = [&](const Capture& cap, const Encoding& enc, const std::string& text, const WordMap& map,
                       const Tensor& units) {
    const SequenceInfo seq = describe_sequence(enc, text, c.causal);
    token_stats.add(cap.attention, seq, cap.value_norms);
    word_stats.add(units, describe_units(seq, map));
    ++r.corpus_texts;
    r.corpus_tokens += static_cast<int64_t>(enc.size());
  };

  // ---- syntax (and, without a corpus, the statistics) on the treebanks ----
  // Sentences go through packed passes (Model::run_batch: each sentence's capture is the one its own
  // run records, to float rounding) of up to kAtlasBatchTokens tokens, and are then scored one by one
  // in file order, so every sum runs in the order of a sentence-at-a-time build.
  struct Sentence {
    size_t index = 0;
    std::string text;
    std::vector<std::pair<int64_t, int64_t>> spans;
  };
  DependencyScorer report_scorer(N), select_scorer(N);
  auto score_treebank = [&](const std::vector<DependencySentence>& tb, DependencyScorer& scorer, bool with_stats,
                            std::string_view stage, int64_t& counted) {
    const auto t0 = Clock::now();
    std::vector<Sentence> batch;
    std::vector<Encoding> encodings;
    int64_t rows = 0;
    const auto flush = [&] {
      if (batch.empty()) return;
      const std::vector<Capture> caps = model.run_batch(encodings, {&capture, 1});
      for (size_t j = 0; j < batch.size(); ++j) {
        const WordMap map = words_from_spans(encodings[j], batch[j].spans);
        const Tensor units = merge_attention(caps[j].attention, map);  // [L, H, U, U]
        scorer.add(tb[batch[j].index], units.ptr(), map);
        ++counted;
        if (with_stats) add_stats(caps[j], encodings[j], batch[j].text, map, units);
      }
      progress(stage, static_cast<int64_t>(batch.back().index + 1), static_cast<int64_t>(tb.size()));
      batch.clear(), encodings.clear(), rows = 0;
    };
    Encoding enc;
    for (size_t i = 0; i < tb.size(); ++i) {
      Sentence s{i, {}, {}};
      s.text = join_words(tb[i], &s.spans);
      if (!encode_whole(model, s.text, enc)) {
        ++r.skipped_sentences;
        continue;
      }
      const int64_t T = static_cast<int64_t>(enc.size());
      if (!batch.empty() && (rows + T > kAtlasBatchTokens || batch.size() >= kAtlasBatchTexts)) flush();
      rows += T;
      batch.push_back(std::move(s));
      encodings.push_back(std::move(enc));
    }
    flush();
    progress(stage, static_cast<int64_t>(tb.size()), static_cast<int64_t>(tb.size()));
    r.seconds_per_stage.emplace_back(std::string(stage), seconds_since(t0));
  };
  score_treebank(report_tb, report_scorer, corpus.empty(), "treebank (report)", r.report_sentences);
  if (!select_tb.empty()) {
    score_treebank(select_tb, select_scorer, false, "treebank (select)", r.select_sentences);
  } else {
    select_scorer = report_scorer;
    r.select_sentences = r.report_sentences;
  }

  // ---- statistics over a separate corpus ----
  if (!corpus.empty()) {
    const auto t0 = Clock::now();
    Encoding enc;
    for (size_t i = 0; i < corpus.size(); ++i) {
      if (!encode_whole(model, corpus[i], enc)) {
        ++r.skipped_texts;
      } else {
        // Corpus texts may be long: their attention is streamed into the statistics, never stored.
        const StreamPlan plan = make_stream_plan(describe_sequence(enc, corpus[i], c.causal), words_from_encoding(enc),
                                                 /*without_specials=*/false, 1, c.window);
        std::vector<HeadStream> heads = make_head_streams(plan, N, c.window);
        run_streamed(model, enc, heads, capture);
        for (int h = 0; h < N; ++h) {
          token_stats.merge_head(size_t(h), heads[size_t(h)].token);
          word_stats.merge_head(size_t(h), heads[size_t(h)].word);
        }
        if (options.text_roles) {
          TextRoles& t = r.texts.emplace_back();
          t.text = corpus[i];
          for (const HeadStream& h : heads) t.stats.push_back(h.token.result());
        }
        ++r.corpus_texts;
        r.corpus_tokens += static_cast<int64_t>(enc.size());
      }
      progress("corpus", static_cast<int64_t>(i + 1), static_cast<int64_t>(corpus.size()));
    }
    r.seconds_per_stage.emplace_back("corpus", seconds_since(t0));
  }
  r.stats = token_stats.result();
  r.word_stats = word_stats.result();

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
  if (!report_gap.empty()) {
    auto score_gap = [&](const std::vector<GapExample>& examples, CorefScorer& scorer, std::string_view stage) {
      const auto t0 = Clock::now();
      Encoding enc;
      for (size_t i = 0; i < examples.size(); ++i) {
        const GapExample& ex = examples[i];
        // Truncation is harmless here: an example whose mentions were cut off is skipped by the scorer.
        if (ex.decidable()) {
          bool ok = true;
          try {
            enc = model.encode(ex.text, /*truncate=*/true);
          } catch (const Error&) {
            ok = false;
          }
          if (ok) scorer.add(ex, enc, model.run(enc, capture).attention);
        }
        progress(stage, static_cast<int64_t>(i + 1), static_cast<int64_t>(examples.size()));
      }
      r.seconds_per_stage.emplace_back(std::string(stage), seconds_since(t0));
    };
    CorefScorer report(N), select(N);
    score_gap(report_gap, report, "coreference (report)");
    if (!select_gap.empty()) {
      score_gap(select_gap, select, "coreference (select)");
    } else {
      select = report;
    }
    r.coref = summarise_coref(select, report, N);
  }

  // ---- relations and roles ----
  join_evidence(r, select_scorer, report_scorer);
  r.seconds_total = seconds_since(t_start);
  return r;
}

}  // namespace headscope
