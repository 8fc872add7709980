// headscope pipeline — probe(), analyse() and the word labels (see headscope/pipeline.h).
#include <algorithm>
#include <cmath>
#include <string>
#include <utility>

#include "analysis/links.h"
#include "analysis/roles.h"
#include "analysis/statistics.h"
#include "analysis/stream.h"
#include "analysis/without_specials.h"
#include "analysis/words.h"
#include "headscope/error.h"
#include "headscope/limits.h"
#include "headscope/pipeline.h"
#include "pipeline/probe.h"
#include "pipeline/stream.h"

namespace headscope {
namespace {

// Every head's statistics at one level (`level` picks its accumulator from a HeadStream), then
// roles from them plus the probe's evidence.
// `free`: on a causal model (StreamPlan::sink_free), the rows without the sink, which the roles are
// read from, with the sink shares of `whole` (the whole rows' statistics at this level; empty: this
// level's own) kept as their evidence (SinkEvidence).
LevelAnalysis analyse_level(const std::vector<analysis::HeadStream>& heads,
                            analysis::HeadStatsAccumulator analysis::HeadStream::*level, analysis::SequenceInfo units,
                            std::span<const analysis::ProbeEvidence> probe,
                            std::span<const analysis::HeadEvidence> corpus,
                            analysis::HeadStatsAccumulator analysis::HeadStream::*free = nullptr,
                            std::span<const analysis::HeadStats> whole_rows = {}) {
  LevelAnalysis out;
  out.stats.reserve(heads.size());
  out.sums.reserve(heads.size());
  for (const analysis::HeadStream& head : heads) {
    out.stats.push_back((head.*level).result());
    out.sums.push_back((head.*level).sums());
  }
  std::vector<analysis::HeadEvidence> evidence(out.stats.size());
  for (size_t i = 0; i < out.stats.size(); ++i) {
    evidence[i].stats = out.stats[i];
    if (free != nullptr) {
      const analysis::HeadStats& whole = whole_rows.empty() ? out.stats[i] : whole_rows[i];
      evidence[i].stats = (heads[i].*free).result();
      evidence[i].sink = analysis::SinkEvidence{whole.sink_mass, whole.first_mass, whole.sink_mass_norm};
    }
    if (i < probe.size()) evidence[i].probe = probe[i];
    if (i < corpus.size()) {
      if (!evidence[i].probe) evidence[i].probe = corpus[i].probe;
      evidence[i].syntax = corpus[i].syntax;
      evidence[i].coref = corpus[i].coref;
    }
  }
  out.roles = analysis::assign_roles(evidence);
  out.units = std::move(units);
  return out;
}

}  // namespace

const char* level_name(Level level) { return level == Level::kToken ? "token" : "word"; }

std::vector<int> kv_head_of(const ModelConfig& c) {
  const int kv = c.n_kv_head > 0 ? c.n_kv_head : c.n_head;
  const int group = kv > 0 ? std::max(1, c.n_head / kv) : 1;
  std::vector<int> map(static_cast<size_t>(std::max(c.n_head, 0)));
  for (int h = 0; h < c.n_head; ++h) map[static_cast<size_t>(h)] = h / group;
  return map;
}

std::vector<analysis::ProbeEvidence> probe(const Model& model, const ProbeOptions& options) {
  return measure_probe(model, options.length, options.count, options.seed);
}

size_t RunAnalysis::bytes() const {
  auto floats = [](const Tensor& t) { return static_cast<size_t>(t.numel()) * sizeof(float); };
  size_t overview_bytes = 0;
  for (const analysis::HeadOverview& o : overviews)
    overview_bytes +=
        (o.sum.size() + o.max.size()) * sizeof(float) + (o.received.size() + o.offset_mass.size()) * sizeof(double);
  return floats(capture.attention) + floats(capture.head_outputs) + floats(capture.contributions) +
         floats(capture.attn_output) + floats(capture.hidden_states) + floats(capture.queries) + floats(capture.keys) +
         floats(capture.value_norms) + floats(capture.mlp_outputs) + floats(word_attention) + text.size() +
         overview_bytes;
}

namespace {

std::string mib(uint64_t bytes) { return std::to_string((bytes + (1 << 20) - 1) >> 20) + " MiB"; }

// The capture a run asks of the model: dense maps in it, or streamed with queries and keys kept.
CaptureOptions capture_for(const AnalyseOptions& options, bool streamed) {
  CaptureOptions capture = options.capture;
  capture.attention = !streamed;              // everything below reads it, stored or streamed
  capture.value_norms = true;                 // [L, H, T]: the norm-weighted statistics, norm_weighted_attention()
  if (streamed) capture.queries_keys = true;  // attention_tile() recomputes from them
  return capture;
}

// One HeadStream's state for T tokens (stream.h): the overview, its marginals and the row
// buffers of its accumulators (with a causal model's rows without the sink) and of the word merge.
uint64_t stream_bytes_per_head(int64_t T, int cells) {
  const uint64_t t = uint64_t(T), c = uint64_t(std::min<int64_t>(T, cells));
  return 2 * c * c * sizeof(float) + 3 * t * sizeof(double) + 11 * t * sizeof(float);
}

void finish_analysis(RunAnalysis& run, std::vector<analysis::HeadStream>& streams, const analysis::StreamPlan& plan,
                     std::span<const analysis::ProbeEvidence> probe, const AnalyseOptions& options);

}  // namespace

// See AnalyseMemory::kept_bytes; the capture's shapes are those of capture/capture.cc.
static uint64_t kept_bytes(const ModelConfig& c, uint64_t t, const CaptureOptions& o, int overview_cells) {
  const uint64_t L = uint64_t(std::max(c.n_layer, 0)), H = uint64_t(std::max(c.n_head, 0));
  const uint64_t KV = c.n_kv_head > 0 ? uint64_t(c.n_kv_head) : H;
  const uint64_t D = uint64_t(std::max(c.d_model, 0)), dh = uint64_t(std::max(c.d_head, 0));
  uint64_t floats = 0;
  if (o.attention) floats += 2 * L * H * t * t;  // the token maps and the word maps beside them
  if (o.head_outputs) floats += L * H * t * dh;
  if (o.contributions) floats += L * H * t * D;
  if (o.head_outputs || o.contributions) floats += L * t * D;  // the attention output
  if (o.hidden_states) floats += (L + 1) * t * D;
  if (o.queries_keys) floats += (L * H + L * KV) * t * dh;
  if (o.logits && c.causal) floats += t * uint64_t(std::max(c.vocab_size, 0));
  if (o.value_norms) floats += L * H * t;
  if (o.mlp_outputs) floats += L * t * D;
  const uint64_t cells = std::min<uint64_t>(t, uint64_t(std::max(overview_cells, 0)));
  const uint64_t overview = 2 * cells * cells * sizeof(float) + (t > 0 ? 3 * t - 1 : 0) * sizeof(double);
  return floats * sizeof(float) + L * H * overview;
}

AnalyseMemory analyse_memory(const Model& model, int64_t T, const AnalyseOptions& options) {
  const ModelConfig& c = model.config();
  const uint64_t heads = uint64_t(c.n_layer) * uint64_t(c.n_head), t = uint64_t(T);
  const uint64_t streams = heads * stream_bytes_per_head(T, options.overview_cells) + 64 * t;  // + the plan
  AnalyseMemory m;
  const CaptureOptions streamed = capture_for(options, true);
  m.dense_bytes = model.run_bytes(T, capture_for(options, false)) + streams +
                  heads * t * t * sizeof(float);  // the word maps beside the token maps (U <= T)
  m.stream_bytes = model.run_bytes(T, streamed) + streams;
  const uint64_t dense_maps = 2 * heads * t * t * sizeof(float);
  using Maps = AnalyseOptions::Maps;
  m.streamed = options.maps == Maps::kStream ||
               (options.maps == Maps::kAuto &&
                (dense_maps > limits::kDenseMapsBytes || m.dense_bytes > model.run_memory_budget()));
  m.bytes = m.streamed ? m.stream_bytes : m.dense_bytes;
  m.kept_bytes = kept_bytes(c, t, m.streamed ? streamed : capture_for(options, false), options.overview_cells);
  return m;
}

RunAnalysis analyse(const Model& model, std::string text, Encoding encoding,
                    std::span<const analysis::ProbeEvidence> probe, const AnalyseOptions& options) {
  if (encoding.size() == 0) throw Error("the text produced no tokens");
  const ModelConfig& c = model.config();
  const int T = static_cast<int>(encoding.size());
  if (T > c.max_positions)
    throw Error("the text is " + std::to_string(T) + " tokens; " + c.name + " allows at most " +
                    std::to_string(c.max_positions),
                Remedy::kTruncate);
  const AnalyseMemory need = analyse_memory(model, T, options);
  const uint64_t budget = model.run_memory_budget();
  if (need.bytes > budget) {
    // What would fit: streaming, or else the longest text in this mode (analyse_memory grows with T).
    std::string hint;
    Remedy remedy = Remedy::kShorterText;
    if (!need.streamed && need.stream_bytes <= budget) {
      hint = "streamed maps would need about " + mib(need.stream_bytes);
      remedy = Remedy::kStreamMaps;
    } else {
      int64_t lo = 0, hi = T;
      while (lo < hi) {
        const int64_t mid = lo + (hi - lo + 1) / 2;
        if (analyse_memory(model, mid, options).bytes <= budget)
          lo = mid;
        else
          hi = mid - 1;
      }
      hint =
          lo > 0 ? "the longest text that fits is about " + std::to_string(lo) + " tokens" : "not even one token fits";
    }
    throw ResourceError("analysing " + std::to_string(T) + " tokens with " + (need.streamed ? "streamed" : "dense") +
                            " attention maps needs about " + mib(need.bytes) + " but " + mib(budget) +
                            " is available (the memory budget); " + hint,
                        remedy);
  }

  RunAnalysis run;
  run.text = std::move(text);
  run.encoding = std::move(encoding);
  run.streamed = need.streamed;
  run.words = analysis::words_from_encoding(run.encoding);
  const analysis::StreamPlan plan =
      analysis::make_stream_plan(analysis::describe_sequence(run.encoding, run.text, c.causal), run.words,
                                 options.without_specials, options.overview_cells, c.window);
  // Every head's rows go through one HeadStream: statistics at both levels, with and without
  // specials, and the overview (analysis/stream.h) — block by block as the pass hands them over
  // when streamed, or from the stored maps afterwards.
  const int64_t heads = int64_t(c.n_layer) * c.n_head;
  std::vector<analysis::HeadStream> streams = analysis::make_head_streams(plan, int(heads), c.window);
  if (run.streamed) {
    run.capture = run_streamed(model, run.encoding, streams, capture_for(options, true), [&](int layer) {
      if (options.progress) options.progress(layer + 1, c.n_layer);
    });
  } else {
    run.capture = model.run(run.encoding, capture_for(options, false));
    analysis::feed_stored(streams, run.capture.attention, run.capture.value_norms);
    run.word_attention = analysis::merge_attention(run.capture.attention, run.words);
    if (options.progress) options.progress(c.n_layer, c.n_layer);
  }
  finish_analysis(run, streams, plan, probe, options);
  return run;
}

std::vector<RunAnalysis> analyse_batch(const Model& model, std::vector<TextToAnalyse> texts,
                                       std::span<const analysis::ProbeEvidence> probe, const AnalyseOptions& options) {
  const ModelConfig& c = model.config();
  std::vector<Encoding> encodings;
  encodings.reserve(texts.size());
  for (TextToAnalyse& t : texts) {
    if (t.encoding.size() == 0) throw Error("the text produced no tokens");
    encodings.push_back(std::move(t.encoding));
  }
  const CaptureOptions capture = capture_for(options, false);
  std::vector<Capture> captures = model.run_batch(encodings, {&capture, 1});  // checks lengths and memory
  std::vector<RunAnalysis> runs(texts.size());
  // Each text's analysis is its own (one thread each; the streams' own loop then runs inline).
#pragma omp parallel for schedule(dynamic)
  for (size_t i = 0; i < texts.size(); ++i) {
    RunAnalysis& run = runs[i];
    run.text = std::move(texts[i].text);
    run.encoding = std::move(encodings[i]);
    run.words = analysis::words_from_encoding(run.encoding);
    run.capture = std::move(captures[i]);
    const analysis::StreamPlan plan =
        analysis::make_stream_plan(analysis::describe_sequence(run.encoding, run.text, c.causal), run.words,
                                   options.without_specials, options.overview_cells, c.window);
    std::vector<analysis::HeadStream> streams = analysis::make_head_streams(plan, c.n_layer * c.n_head, c.window);
    analysis::feed_stored(streams, run.capture.attention, run.capture.value_norms);
    run.word_attention = analysis::merge_attention(run.capture.attention, run.words);
    finish_analysis(run, streams, plan, probe, options);
  }
  return runs;
}

namespace {

// What analyse() and analyse_attention() do once every head's rows went through its stream:
// statistics and roles at each level, the overviews, and (dense maps) each head on this text.
void finish_analysis(RunAnalysis& run, std::vector<analysis::HeadStream>& streams, const analysis::StreamPlan& plan,
                     std::span<const analysis::ProbeEvidence> probe, const AnalyseOptions& options) {
  const int64_t heads = int64_t(streams.size());
  const int T = run.T();
  using analysis::HeadStream;
  // A causal model's roles come from the rows without the sink at both levels (with or without specials).
  const auto token_free = plan.sink_free ? &HeadStream::token_free : nullptr;
  const auto word_free = plan.sink_free ? &HeadStream::word_free : nullptr;
  run.token_level = analyse_level(streams, &HeadStream::token, plan.tokens, probe, options.corpus, token_free);
  run.word_level = analyse_level(streams, &HeadStream::word, plan.word_units, probe, options.corpus, word_free);
  if (options.without_specials) {
    run.token_plain = analyse_level(streams, &HeadStream::token_plain, plan.token_plain.units, probe, options.corpus,
                                    token_free, run.token_level.stats);
    run.word_plain = analyse_level(streams, &HeadStream::word_plain, plan.word_plain.units, probe, options.corpus,
                                   word_free, run.word_level.stats);
  }
  run.overviews.reserve(streams.size());
  for (HeadStream& head : streams) run.overviews.push_back(head.take_overview());

  // Each head on this text in words (dense maps only: it reads every row).
  if (!run.streamed) {
    const std::vector<std::string> labels = token_labels(run);
    const analysis::SequenceInfo& seq = run.token_level.units;
    run.sink_columns = analysis::sink_columns_text(seq, labels);
    run.on_text.reserve(size_t(heads));
    const analysis::HeadEvidence none;
    for (int64_t i = 0; i < heads; ++i) {
      const float* map = run.capture.attention.ptr() + i * int64_t(T) * T;
      const analysis::HeadEvidence& corpus = size_t(i) < options.corpus.size() ? options.corpus[size_t(i)] : none;
      run.on_text.push_back(analysis::describe_text(map, labels, seq, corpus, run.token_level.roles[size_t(i)]));
    }
  }
}

}  // namespace

RunAnalysis analyse_attention(const ModelConfig& config, std::string text, Encoding encoding, Tensor attention,
                              const AnalyseOptions& options) {
  const int64_t L = config.n_layer, H = config.n_head, T = int64_t(encoding.size());
  if (T == 0) throw Error("analyse_attention: no tokens; give one label per query/key position");
  if (L < 1 || L > limits::kMaxLayers || H < 1 || H > limits::kMaxHeads)
    throw Error("analyse_attention: the config gives " + std::to_string(L) + " layers of " + std::to_string(H) +
                " heads; give 1 to " + std::to_string(limits::kMaxLayers) + " layers and 1 to " +
                std::to_string(limits::kMaxHeads) + " heads");
  attention.expect_shape({L, H, T, T},
                         "analyse_attention: attention [layer, head, q, k] for " + std::to_string(T) + " tokens");
  RunAnalysis run;
  run.text = std::move(text);
  run.encoding = std::move(encoding);
  run.words = analysis::words_from_encoding(run.encoding);
  if (!config.window.empty() && int64_t(config.window.size()) != L)
    throw Error("analyse_attention: the config gives " + std::to_string(config.window.size()) + " layer windows for " +
                std::to_string(L) + " layers; give one per layer (0 = none) or none");
  analysis::SequenceInfo seq = analysis::describe_sequence(run.encoding, run.text, config.causal);
  // Every row must be a distribution over the keys its query may see (what softmax writes):
  // statistics of anything else would be numbers without a meaning.
  const float* a = attention.ptr();
  for (int64_t i = 0; i < L * H; ++i) {
    seq.window = config.window.empty() ? 0 : config.window.at(size_t(i / H));
    for (int64_t q = 0; q < T; ++q) {
      double total = 0;
      for (int64_t k = 0; k < T; ++k) {
        const float w = a[(i * T + q) * T + k];
        if (!std::isfinite(w) || w < 0 || (!seq.may_attend(int(q), int(k)) && w != 0))
          throw Error("analyse_attention: layer " + std::to_string(i / H) + " head " + std::to_string(i % H) + " row " +
                      std::to_string(q) + " key " + std::to_string(k) + " holds " + std::to_string(w) +
                      (config.causal ? "; weights must be finite, >= 0 and 0 above the diagonal (causal)"
                                     : "; weights must be finite and >= 0") +
                      (seq.window > 0
                           ? " (and 0 outside the layer's sliding window of " + std::to_string(seq.window) + ")"
                           : ""));
        total += w;
      }
      if (std::abs(total - 1.0) > limits::kMaxAttentionRowSumError)
        throw Error("analyse_attention: layer " + std::to_string(i / H) + " head " + std::to_string(i % H) + " row " +
                    std::to_string(q) + " sums to " + std::to_string(total) +
                    "; each row must be a probability distribution over the keys (softmax output)");
    }
  }
  seq.window = 0;
  const analysis::StreamPlan plan =
      analysis::make_stream_plan(seq, run.words, options.without_specials, options.overview_cells, config.window);
  std::vector<analysis::HeadStream> streams = analysis::make_head_streams(plan, int(L * H), config.window);
  analysis::feed_stored(streams, attention, {});
  run.word_attention = analysis::merge_attention(attention, run.words);
  run.capture.n_layer = int(L);
  run.capture.n_head = int(H);
  run.capture.n_kv_head = int(H);
  run.capture.T = int(T);
  run.capture.attention = std::move(attention);
  finish_analysis(run, streams, plan, {}, options);
  return run;
}

std::vector<std::string> token_labels(const RunAnalysis& run) {
  std::vector<std::string> labels;
  labels.reserve(run.encoding.size());
  for (const Token& t : run.encoding.tokens) {
    std::string s = t.special || t.end <= t.begin
                        ? t.text
                        : run.text.substr(static_cast<size_t>(t.begin), static_cast<size_t>(t.end - t.begin));
    const size_t a = s.find_first_not_of(" \t\r\n"), b = s.find_last_not_of(" \t\r\n");
    // A token of whitespace alone reads as its display form (␣, ↵), never the vocabulary's bytes (Ġ, Ċ).
    labels.push_back(a == std::string::npos ? token_display(run.text, t) : s.substr(a, b - a + 1));
  }
  return labels;
}

std::vector<HeadLink> heads_linking(const Model& model, const RunAnalysis& run, int query, int key) {
  const ModelConfig& c = model.config();
  const int T = run.T();
  if (query < 0 || query >= T || key < 0 || key >= T)
    throw Error("heads_linking: tokens " + std::to_string(query) + " → " + std::to_string(key) +
                " are not both among the " + std::to_string(T) + " tokens of the text (0 to " + std::to_string(T - 1) +
                ")");
  const analysis::SequenceInfo& seq = run.token_level.units;
  const auto sink = [&](int k) { return k == 0 || seq.kinds[size_t(k)] == analysis::TokenKind::kSpecial; };
  std::vector<HeadLink> out;
  for (int l = 0; l < c.n_layer; ++l)
    for (int h = 0; h < c.n_head; ++h) {
      const Tensor row = attention_tile(model, run, l, h, query, query + 1, 0, T);  // [1, T]
      double kept = 0;
      for (int k = 0; k < T; ++k)
        if (!sink(k)) kept += row.ptr()[k];
      const double w = row.ptr()[key];
      out.push_back(HeadLink{l, h, w, sink(key) || kept <= 0 ? 0.0 : w / kept});
    }
  std::stable_sort(out.begin(), out.end(), [](const HeadLink& a, const HeadLink& b) { return a.weight > b.weight; });
  return out;
}

namespace {

// The norm-weighted shares of rows q0 .. q1 − 1 over keys k0 .. k1 − 1 (attention_tile's
// `norm_weighted`): each row's weights over every key times the value norms, summed in double in
// key order and divided as attention_view() does, so that a dense run's tile equals its view.
Tensor norm_weighted_tile(const Model& model, const RunAnalysis& run, int layer, int head, int q0, int q1, int k0,
                          int k1) {
  const ModelConfig& c = model.config();
  const int T = run.T();
  const Tensor& norms = run.capture.value_norms;  // [L, H, T]
  if (norms.numel() != int64_t{c.n_layer} * c.n_head * T)
    throw Error("the norm-weighted view needs the run's value norms [n_layer, n_head, T], and this run kept none");
  const float* n = norms.ptr() + (int64_t{layer} * c.n_head + head) * T;
  Tensor tile({q1 - q0, k1 - k0}, Tensor::Uninitialized{});
  const int rows = static_cast<int>(std::max<int64_t>(1, limits::kMaxTileCells / T));  // whole rows at a time
  for (int r0 = q0; r0 < q1; r0 += rows) {
    const int r1 = std::min(q1, r0 + rows);
    const Tensor w = attention_tile(model, run, layer, head, r0, r1, 0, T);  // [r1 − r0, T]
    for (int q = r0; q < r1; ++q) {
      const float* a = w.ptr() + int64_t(q - r0) * T;
      double total = 0;
      for (int k = 0; k < T; ++k) total += a[k] * n[k];  // α_qk · ‖f_h(x_k)‖ in float, summed in double
      float* out = tile.ptr() + int64_t(q - q0) * (k1 - k0);
      for (int k = k0; k < k1; ++k) {
        const float v = a[k] * n[k];
        out[k - k0] = total > 0 ? static_cast<float>(v / total) : v;
      }
    }
  }
  return tile;
}

}  // namespace

Tensor attention_tile(const Model& model, const RunAnalysis& run, int layer, int head, int q0, int q1, int k0, int k1,
                      bool norm_weighted) {
  const ModelConfig& c = model.config();
  const int T = run.T();
  if (layer < 0 || layer >= c.n_layer || head < 0 || head >= c.n_head)
    throw Error("attention tile: layer " + std::to_string(layer) + " head " + std::to_string(head) + " is not in " +
                std::to_string(c.n_layer) + " layers × " + std::to_string(c.n_head) + " heads");
  const auto range = [T](int a, int b) { return 0 <= a && a < b && b <= T; };
  if (!range(q0, q1) || !range(k0, k1))
    throw Error("attention tile: rows " + std::to_string(q0) + ".." + std::to_string(q1) + " × keys " +
                std::to_string(k0) + ".." + std::to_string(k1) + " is not a non-empty range of the " +
                std::to_string(T) + " tokens (end exclusive)");
  if (int64_t(q1 - q0) * (k1 - k0) > limits::kMaxTileCells)
    throw ResourceError("attention tile: " + std::to_string(q1 - q0) + " × " + std::to_string(k1 - k0) +
                        " cells is over the limit of " + std::to_string(limits::kMaxTileCells) +
                        "; ask for a smaller one");
  if (norm_weighted) return norm_weighted_tile(model, run, layer, head, q0, q1, k0, k1);
  Tensor tile({q1 - q0, k1 - k0}, Tensor::Uninitialized{});
  if (run.capture.attention.empty()) {  // streamed: computed again from the kept queries and keys
    model.attention_from_qk(run.capture, layer, head, q0, q1, k0, k1, tile.ptr());
    return tile;
  }
  const float* src = run.capture.attention.ptr() + ((int64_t(layer) * c.n_head + head) * T + q0) * T;  // [q1 − q0, T]
  for (int q = q0; q < q1; ++q)
    std::copy_n(src + int64_t(q - q0) * T + k0, k1 - k0, tile.ptr() + int64_t(q - q0) * (k1 - k0));
  return tile;
}

std::vector<WordUnit> word_units(const RunAnalysis& run) {
  const analysis::WordMap& map = run.words;
  std::vector<WordUnit> units(static_cast<size_t>(std::max(map.n_units, 0)));
  for (size_t t = 0; t < map.unit_of_token.size(); ++t)
    if (map.unit_of_token[t] >= 0)
      units[static_cast<size_t>(map.unit_of_token[t])].tokens.push_back(static_cast<int>(t));
  for (WordUnit& u : units) {
    if (u.tokens.empty()) continue;
    const Token& first = run.encoding.tokens[static_cast<size_t>(u.tokens.front())];
    const Token& last = run.encoding.tokens[static_cast<size_t>(u.tokens.back())];
    u.special = first.special;
    u.text = u.special || last.end <= first.begin
                 ? first.text
                 : run.text.substr(static_cast<size_t>(first.begin), static_cast<size_t>(last.end - first.begin));
  }
  return units;
}

}  // namespace headscope
