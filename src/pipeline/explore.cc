// headscope — what the explorer, the CLI and Python show of a run: view availability, the maps of
// a view, overview slices, link search, generation text (see headscope/pipeline.h).
#include <algorithm>
#include <string>
#include <utility>

#include "headscope/error.h"
#include "headscope/pipeline.h"

namespace headscope {

const std::vector<std::pair<std::string, AnalyseOptions::Maps>>& maps_names() {
  static const std::vector<std::pair<std::string, AnalyseOptions::Maps>> names = {
      {"auto", AnalyseOptions::Maps::kAuto},
      {"dense", AnalyseOptions::Maps::kDense},
      {"stream", AnalyseOptions::Maps::kStream}};
  return names;
}

std::optional<AnalyseOptions::Maps> maps_from_name(std::string_view name) {
  for (const auto& [n, maps] : maps_names())
    if (n == name) return maps;
  return std::nullopt;
}

ModelDescription describe_model(const Model& model) { return {model.config()}; }

std::string join_pieces(Encoding& encoding) {
  std::string text;
  int32_t word = 0;
  for (Token& t : encoding.tokens) {
    if (t.special) continue;
    if (!text.empty()) text += ' ';
    t.begin = int64_t(text.size());
    text += t.text;
    t.end = int64_t(text.size());
    t.word = word++;
  }
  return text;
}

bool is_valid_utf8(std::string_view text, size_t* bad_offset) {
  const auto* s = reinterpret_cast<const unsigned char*>(text.data());
  const size_t n = text.size();
  size_t i = 0;
  auto fail = [&](size_t at) {
    if (bad_offset) *bad_offset = at;
    return false;
  };
  while (i < n) {
    const unsigned char c = s[i];
    if (c < 0x80) {
      ++i;
      continue;
    }
    // Lead byte → sequence length and the allowed range of the second byte (RFC 3629, table 3-7
    // of the Unicode standard), which rules out overlong forms, surrogates and > U+10FFFF.
    size_t len;
    unsigned char lo = 0x80, hi = 0xBF;
    if (c >= 0xC2 && c <= 0xDF) {
      len = 2;
    } else if (c >= 0xE0 && c <= 0xEF) {
      len = 3;
      if (c == 0xE0) lo = 0xA0;
      if (c == 0xED) hi = 0x9F;
    } else if (c >= 0xF0 && c <= 0xF4) {
      len = 4;
      if (c == 0xF0) lo = 0x90;
      if (c == 0xF4) hi = 0x8F;
    } else {
      return fail(i);
    }
    if (i + len > n) return fail(i);
    if (s[i + 1] < lo || s[i + 1] > hi) return fail(i);
    for (size_t k = 2; k < len; ++k)
      if (s[i + k] < 0x80 || s[i + k] > 0xBF) return fail(i);
    i += len;
  }
  return true;
}

size_t incomplete_utf8_tail(std::string_view text) {
  // Walk back over at most three continuation bytes to the lead byte of the last sequence.
  const auto* s = reinterpret_cast<const unsigned char*>(text.data());
  const size_t n = text.size();
  size_t start = n;
  while (start > 0 && n - start < 3 && (s[start - 1] & 0xC0) == 0x80) --start;
  if (start == 0) return 0;
  const unsigned char lead = s[start - 1];
  const size_t have = n - start + 1;  // lead byte and the continuation bytes after it
  const size_t need = lead >= 0xC2 && lead <= 0xDF   ? 2
                      : lead >= 0xE0 && lead <= 0xEF ? 3
                      : lead >= 0xF0 && lead <= 0xF4 ? 4
                                                     : 0;
  if (need == 0 || have >= need) return 0;
  // Held back only if what is there can still become a character: the second byte's range rules
  // out overlong forms, surrogates and code points above U+10FFFF (as in is_valid_utf8).
  if (have >= 2) {
    unsigned char lo = 0x80, hi = 0xBF;
    if (lead == 0xE0) lo = 0xA0;
    if (lead == 0xED) hi = 0x9F;
    if (lead == 0xF0) lo = 0x90;
    if (lead == 0xF4) hi = 0x8F;
    if (s[start] < lo || s[start] > hi) return 0;
  }
  return have;
}

// ---- views of a run ----

std::optional<std::string> view_unavailable(const RunAnalysis& run, AttentionView view) {
  if (view == AttentionView::kWeights) return std::nullopt;
  const char* name = view == AttentionView::kNorm ? "norm-weighted" : "rollout";
  if (run.streamed)
    return std::string("the ") + name + " view needs the whole attention maps, and this text's " +
           std::to_string(run.T()) +
           " tokens were streamed (whole maps are kept only while the run fits the "
           "memory budget): analyse a shorter text";
  if (view == AttentionView::kRollout && run.T() > limits::kMaxRolloutTokens)
    return "the rollout view multiplies every layer's T x T map (n_layer · T³): this text's " +
           std::to_string(run.T()) + " tokens are over the limit of " + std::to_string(limits::kMaxRolloutTokens) +
           "; analyse a shorter text";
  return std::nullopt;
}

ViewAvailability view_availability(const RunAnalysis& run) {
  return {view_unavailable(run, AttentionView::kWeights), view_unavailable(run, AttentionView::kNorm),
          view_unavailable(run, AttentionView::kRollout)};
}

RunDocument run_document(const ModelConfig& config, const RunAnalysis& run, Level level, bool hide_special,
                         bool with_views) {
  RunDocument d{&config, &run, level, hide_special, std::nullopt, std::nullopt};
  if (with_views) d.views = view_availability(run);
  if (!run.overviews.empty()) {
    const analysis::HeadOverview& o = run.overviews.front();
    OverviewGrid grid;
    grid.cells = o.cells;
    grid.T = o.T;
    grid.starts.assign(static_cast<size_t>(o.cells) + 1, o.T);
    for (int t = o.T - 1; t >= 0; --t) grid.starts[static_cast<size_t>(o.cell_of(t))] = t;
    d.overview = std::move(grid);
  }
  return d;
}

namespace {

// Each row renormalised to sum 1 (a row of zeros stays zeros): the norm-weighted view is shown as
// shares of what a query's output moved, on the same 0–1 scale as the weights (docs/explorer.md).
void renormalise_rows(float* rows, int64_t n_rows, int64_t cols) {
  for (int64_t r = 0; r < n_rows; ++r) {
    float* row = rows + r * cols;
    double total = 0;
    for (int64_t k = 0; k < cols; ++k) total += row[k];
    if (total > 0)
      for (int64_t k = 0; k < cols; ++k) row[k] = static_cast<float>(row[k] / total);
  }
}

}  // namespace

Tensor attention_view(const ModelConfig& c, const RunAnalysis& run, AttentionView view, Level level,
                      std::optional<int> layer, std::optional<int> head, const Tensor* rollout) {
  const int l0 = layer.value_or(0), nl = layer ? 1 : c.n_layer;
  const int h0 = head.value_or(0), nh = view == AttentionView::kRollout ? 1 : head ? 1 : c.n_head;
  // The requested layers and heads at token level, [nl, nh, T, T], or straight from the word maps.
  const Tensor& att = run.attention(view == AttentionView::kWeights ? level : Level::kToken);
  const int64_t T = att.dim(2), block = T * T;
  if (view == AttentionView::kNorm && run.capture.value_norms.numel() != int64_t{c.n_layer} * c.n_head * T)
    throw Error("the norm-weighted view needs the run's value norms [n_layer, n_head, T], and this run kept none");
  if (view == AttentionView::kRollout && rollout == nullptr)
    throw Error("attention_view: the rollout view needs the run's rollout");
  Tensor part({nl, nh, T, T}, Tensor::Uninitialized{});
  for (int l = l0; l < l0 + nl; ++l)
    for (int h = h0; h < h0 + nh; ++h) {
      float* dst = part.ptr() + (static_cast<int64_t>(l - l0) * nh + (h - h0)) * block;
      if (view == AttentionView::kRollout) {
        std::copy_n(rollout->ptr() + static_cast<int64_t>(l) * block, block, dst);
      } else if (view == AttentionView::kWeights) {
        std::copy_n(att.ptr() + (static_cast<int64_t>(l) * c.n_head + h) * block, block, dst);
      } else {
        // α_qk · ‖v_k W_O,hᵀ‖ (norm_weighted_attention, one head), then rows to shares.
        norm_weighted_head(run, l, h, dst);
        renormalise_rows(dst, T, T);
      }
    }
  if (view != AttentionView::kWeights && level == Level::kWord)
    part = merge_into_words(run, part);  // keys summed per word, queries averaged
  return part;
}

OverviewSlice overview_slice(const ModelConfig& c, const RunAnalysis& run, int layer, std::optional<int> head,
                             OverviewPart part) {
  if (run.overviews.size() != static_cast<size_t>(c.n_layer) * static_cast<size_t>(c.n_head))
    throw Error("this run kept no overview maps");
  const int h0 = head.value_or(0), nh = head ? 1 : c.n_head;
  OverviewSlice out;
  for (int h = h0; h < h0 + nh; ++h) {
    const analysis::HeadOverview& o = run.overviews[static_cast<size_t>(layer) * c.n_head + h];
    switch (part) {
      case OverviewPart::kMaps:
        out.values.insert(out.values.end(), o.sum.begin(), o.sum.end());
        out.values.insert(out.values.end(), o.max.begin(), o.max.end());
        out.shape = {nh, 2, o.cells, o.cells};
        break;
      case OverviewPart::kReceived:
        out.values.insert(out.values.end(), o.received.begin(), o.received.end());
        out.shape = {nh, static_cast<int64_t>(o.received.size())};
        break;
      case OverviewPart::kOffsets:
        out.values.insert(out.values.end(), o.offset_mass.begin(), o.offset_mass.end());
        out.shape = {nh, static_cast<int64_t>(o.offset_mass.size())};
        break;
    }
  }
  return out;
}

LinkSearch link_search(const Model& model, const RunAnalysis& run, int q, int k, int limit) {
  const int n_head = model.config().n_head;
  LinkSearch out;
  out.q = q, out.k = k;
  const std::vector<std::string> labels = token_labels(run);
  out.query = labels.at(static_cast<size_t>(q));
  out.key = labels.at(static_cast<size_t>(k));
  out.sink_columns = run.sink_columns;
  for (const HeadLink& l : heads_linking(model, run, q, k)) {
    if (static_cast<int>(out.heads.size()) >= limit) break;
    out.heads.push_back({l, run.token_level.roles.at(static_cast<size_t>(l.layer * n_head + l.head))});
  }
  return out;
}

GenerationResult describe_generation(const Model& model, std::string prompt, const Encoding& prompt_encoding,
                                     Generation generation, bool check_retokenizes) {
  GenerationResult r;
  r.prompt = std::move(prompt);
  const std::vector<int32_t>& ids = generation.ids;
  r.tokens = prompt_encoding;
  for (size_t t = prompt_encoding.size(); t < ids.size(); ++t)
    r.tokens.tokens.push_back({ids[t], model.tokenizer().token_text(ids[t]), 0, 0, false, -1});
  const std::string before = model.tokenizer().decode(prompt_encoding.ids());
  r.decoded = model.tokenizer().decode(ids);
  if (r.decoded.compare(0, before.size(), before) == 0) r.continuation = r.decoded.substr(before.size());
  r.held_back_bytes = incomplete_utf8_tail(r.continuation);
  r.held_back = r.continuation.substr(r.continuation.size() - r.held_back_bytes);
  r.continuation.resize(r.continuation.size() - r.held_back_bytes);
  r.text = r.prompt + r.continuation;
  r.retokenizes_same =
      check_retokenizes && r.held_back_bytes == 0 && is_valid_utf8(r.text) && model.encode(r.text).ids() == ids;
  r.generation = std::move(generation);
  return r;
}

}  // namespace headscope
