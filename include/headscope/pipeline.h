// headscope — the pipeline: everything a frontend asks of the core, each written once.
//
//   probe()      induction / duplicate-token evidence of a model (the repeated-random-tokens probe);
//                measured once per model, then handed to every analyse()
//   corpus_evidence()  syntax (UD) and coreference (GAP) evidence of every head plus the probe,
//                computed once per model and cached on disk; handed to every analyse()
//   analyse()    one text: forward pass, statistics and roles of every head at token and word level
//                (and with the special tokens left out), roles with the probe's evidence
//   decompose()  one token of one layer through W_O: each head's output, its contribution, their sum
//   generate()   greedy continuation through the KV cache, optionally capturing every attention row
//   make_atlas() the corpus atlas of a model (and a control model): JSON, Markdown and PNG grids
//   Ablator      head ablation over a set of texts: its effect on the output, per-head importance,
//                a gradient-free proxy and the pruning curve (docs/causal.md); ablate_text(),
//                measure_importance() and prune_heads() turn it into the results frontends print
//
// `headscope run`, `generate`, `atlas` and the server's /api/* call these and only parse, call and
// format; the JSON of every object they return is written by headscope/json.h (docs/schema.md).
// Implemented in src/pipeline/.
#pragma once
#include <array>
#include <cstdint>
#include <functional>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "headscope/analysis.h"
#include "headscope/circuits.h"
#include "headscope/limits.h"
#include "headscope/model.h"

namespace headscope {

// Token level: the model's own positions. Word level: pieces merged into words, each special
// token a unit of its own (attention to a word is the sum over its pieces, from a word the mean).
enum class Level { kToken, kWord };
const char* level_name(Level level);  // "token", "word"

// Statistics and roles of every head over the units of one level.
struct LevelAnalysis {
  analysis::SequenceInfo units;            // [U] kinds of the units
  std::vector<analysis::HeadStats> stats;  // [n_layer * n_head], index layer * n_head + head
  std::vector<analysis::HeadRoles> roles;  // [n_layer * n_head]
  std::vector<analysis::StatSums> sums;    // [n_layer * n_head] what stats are the means of (CorpusStats adds them)
};

// One analysed text.
struct RunAnalysis {
  std::string text;
  bool truncate = false;    // the caller allowed truncation (a cache key; analyse() leaves it)
  Encoding encoding;        // T tokens
  Capture capture;          // as asked by AnalyseOptions::capture
  analysis::WordMap words;  // token → unit
  Tensor word_attention;    // [n_layer, n_head, U, U]
  LevelAnalysis token_level, word_level;
  // The same with special tokens removed and rows renormalised (empty unless asked for).
  LevelAnalysis token_plain, word_plain;
  // [n_layer * n_head] every head's pooled map and marginals at token level (any length).
  std::vector<analysis::HeadOverview> overviews;
  // [n_layer * n_head] each head on this text in words (token level, sinks discounted;
  // analysis/links.h). Empty for streamed runs.
  std::vector<analysis::TextEvidence> on_text;
  std::string sink_columns;  // what the discount dropped: "[CLS] and [SEP]", "the first token"
  // True when the maps were streamed: capture.attention and word_attention are empty and the
  // capture holds queries and keys instead (attention_tile() reads them).
  bool streamed = false;

  int T() const { return static_cast<int>(encoding.size()); }
  const Tensor& attention(Level level) const { return level == Level::kToken ? capture.attention : word_attention; }
  const LevelAnalysis& analysis(Level level, bool hide_special = false) const {
    if (level == Level::kToken) return hide_special ? token_plain : token_level;
    return hide_special ? word_plain : word_level;
  }
  // Bytes of tensors (and text) held, for a cache budget.
  size_t bytes() const;
};

// A word unit labelled with the original text it covers (a special token: its own text).
struct WordUnit {
  std::string text;
  std::vector<int> tokens;  // token indices, in order
  bool special = false;
};
std::vector<WordUnit> word_units(const RunAnalysis& run);
// [T] each token's text as it appears in the text (trimmed; a special token: its own text), for
// labels such as "'it' → 'trophy'".
std::vector<std::string> token_labels(const RunAnalysis& run);

// Query head → key/value head: grouped-query attention shares each KV head among n_head /
// n_kv_head consecutive query heads (transformers' repeat_kv); the identity without GQA.
std::vector<int> kv_head_of(const ModelConfig& config);

// ---- probe ----

struct ProbeOptions {  // the atlas's defaults (AtlasOptions), so that both label heads alike
  int length = 50;     // random tokens per copy
  int count = 4;       // probes averaged
  uint32_t seed = 1234;
};
// [n_layer * n_head]. Throws Error when the probe is longer than the model allows.
std::vector<analysis::ProbeEvidence> probe(const Model& model, const ProbeOptions& options = {});

// ---- analyse ----

struct AnalyseOptions {
  CaptureOptions capture;         // what the forward pass records (attention is always needed)
  bool without_specials = false;  // also fill token_plain and word_plain
  int overview_cells = 256;       // resolution of RunAnalysis::overviews (rows = columns)
  // How the attention maps are held. kDense: [n_layer, n_head, T, T] in the capture and the word
  // maps beside it (for --npy and the explorer's full maps; memory grows with T²). kStream: every
  // layer's maps are handed block by block to the statistics and dropped; the run keeps the
  // overviews and each layer's queries and keys, from which attention_tile() computes any
  // rectangle exactly (memory grows with T). kAuto: dense while the maps fit in
  // limits::kDenseMapsBytes and the whole run in the memory budget, streamed beyond.
  enum class Maps { kAuto, kDense, kStream };
  Maps maps = Maps::kAuto;
  // Called after each layer's attention has been analysed (layers done, layers in all).
  std::function<void(int done, int layers)> progress;
  // [n_layer * n_head] corpus evidence (CorpusEvidence::heads): its syntax and coreference join
  // this text's statistics in every head's roles (and its probe when `probe` is empty). Empty:
  // roles from the text and the probe only.
  std::span<const analysis::HeadEvidence> corpus;
};

// What analyse() would allocate for T tokens with `options` (the forward pass, the maps or the
// streams, the word maps), and whether it would stream.
struct AnalyseMemory {
  uint64_t bytes = 0;
  bool streamed = false;
  uint64_t dense_bytes = 0;   // the same run with dense maps
  uint64_t stream_bytes = 0;  // the same run streamed
  // What the RunAnalysis holds once analyse() returns (RunAnalysis::bytes() less the text): the
  // capture of the chosen mode, the word maps beside dense token maps (counted at U = T), and
  // every head's overview (two [cells, cells] float maps, received [T] and offsets [2T − 1] in
  // double). A cache of runs budgets with it.
  uint64_t kept_bytes = 0;
};
AnalyseMemory analyse_memory(const Model& model, int64_t T, const AnalyseOptions& options);
// Runs `encoding` (of `text`) and analyses it. Before it allocates anything it checks
// analyse_memory() against the model's run memory budget (LoadOptions::run_memory_budget) and
// throws ResourceError with the estimate and what would fit. `probe`: [n_layer * n_head] from probe(), or
// empty (then no head can be labelled induction or duplicate-token). Roles come from this text's
// statistics plus the probe; syntactic and coreference roles need gold data: make_atlas().
RunAnalysis analyse(const Model& model, std::string text, Encoding encoding,
                    std::span<const analysis::ProbeEvidence> probe, const AnalyseOptions& options = {});

// analyse() of several short texts with dense maps, their forward passes packed into one
// (Model::run_batch): result i is what analyse(texts[i]) gives with Maps::kDense, to float
// rounding (the packed GEMMs sum in other blocks; tests/unit/corpus_test.cc bounds it). The
// batch's memory is checked before anything is allocated (ResourceError: split the batch);
// options.progress is not called. Texts are analysed in parallel once the pass is done.
struct TextToAnalyse {
  std::string text;
  Encoding encoding;
};
std::vector<RunAnalysis> analyse_batch(const Model& model, std::vector<TextToAnalyse> texts,
                                       std::span<const analysis::ProbeEvidence> probe,
                                       const AnalyseOptions& options = {});

// ---- corpus: many texts, packed passes (src/pipeline/corpus.cc, docs/corpus.md) ----

// One text of a corpus file.
struct CorpusText {
  std::string id;  // the line's "id" (JSON Lines), the sentence's sent_id (CoNLL-U), else "line N"
  std::string text;
  std::string error;  // why the line cannot be analysed (not JSON, no "text", invalid UTF-8); "" when fine
};
// A corpus file, read whole (at most limits::kMaxCorpusFileBytes): JSON Lines ({"text": ..., "id":
// ...} per line) when its name ends in .jsonl, a treebank (each sentence's words joined by spaces)
// when it ends in .conllu, else one text per line. Blank lines are skipped. A bad line becomes a
// CorpusText with its error, so the rest still runs; an unreadable file (or a malformed treebank)
// throws Error.
std::vector<CorpusText> read_corpus(const std::string& path);

// How far a corpus job is.
struct CorpusProgress {
  int64_t done = 0, total = 0, failed = 0;  // texts (failed ones count as done)
  int64_t tokens = 0;                       // of the texts analysed
  double seconds = 0;                       // wall time so far
  double texts_per_second() const;
  double eta_seconds() const;  // at the rate so far
};
struct CorpusFailure {
  size_t index = 0;  // in the corpus
  std::string id, error;
};
struct CorpusSummary {
  CorpusProgress progress;
  std::vector<CorpusFailure> failures;
};
struct CorpusOptions {
  AnalyseOptions analyse;  // statistics' level, without_specials, corpus evidence (maps and capture are the job's)
  bool truncate = false;   // cut texts longer than the model reads instead of reporting them
  // Texts are grouped in corpus order into packed passes of at most this many tokens and texts; a
  // text longer than batch_tokens runs alone (streamed when its dense maps would not fit).
  int64_t batch_tokens = 2048;
  int64_t batch_texts = 256;
  std::function<void(const CorpusProgress&)> progress;   // after every pass
  std::function<void(const CorpusFailure&)> on_failure;  // as each failure happens
};
// Called once per analysed text, in corpus order: its index, the text, its analysis (dropped after).
using CorpusSink = std::function<void(size_t index, const CorpusText& text, const RunAnalysis& run)>;
// Every text of `texts` analysed as analyse() would (dense maps, attention captured alone; to float
// rounding, see analyse_batch), each handed to `each` and dropped, so memory stays that of one
// pass. A text that cannot be analysed (its line's error, no tokens, too long without truncate,
// over the memory budget even alone) is reported in the summary and through on_failure; the
// others go on.
CorpusSummary analyse_corpus(const Model& model, std::span<const CorpusText> texts,
                             std::span<const analysis::ProbeEvidence> probe, const CorpusOptions& options,
                             const CorpusSink& each);
// CSV of corpus records, one row per text × head: text (index), id, layer, head, kv_head (all
// 0-based), the statistics of the catalogue (not offset_mass), role, role_score, secondary,
// secondary_score, links (the head's strongest links on the text, token level).
std::string corpus_csv_header();
std::string corpus_csv_rows(const ModelConfig& config, size_t index, const std::string& id, const RunAnalysis& run,
                            Level level);

// Statistics and roles of attention maps computed elsewhere ("bring your own attention", the
// Python package's analyse_attention): `attention` [n_layer, n_head, T, T] for the T tokens of
// `encoding` (of `text`), as analyse() would have captured them for a model shaped like `config`
// (n_layer, n_head, causal are read). No model runs: no probe (no induction or duplicate-token
// evidence), no value norms (sink_mass_norm is NaN), corpus evidence only from options.corpus.
// Throws Error for a wrong shape, or a row that is not a distribution over the keys its query
// may see (within limits::kMaxAttentionRowSumError).
RunAnalysis analyse_attention(const ModelConfig& config, std::string text, Encoding encoding, Tensor attention,
                              const AnalyseOptions& options = {});

// One head's exact token-level attention over query rows q0 .. q1 − 1 and keys k0 .. k1 − 1:
// [q1 − q0, k1 − k0], from the stored maps, or computed again from the run's queries and keys
// when it was streamed (the same kernel as the pass: equal to the dense map to float rounding).
// Throws Error for a layer, head or range outside the run, an empty or inverted range, or a tile
// over limits::kMaxTileCells.
// `norm_weighted`: the same region of the norm-weighted view instead, α_qk · ‖f_h(x_k)‖ from the
// run's value norms with each query's whole row (every key, not only the tile's) rescaled to sum 1:
// the values attention_view() gives under AttentionView::kNorm, for a streamed run too (its rows
// computed again, a few at a time). Throws Error when the run kept no value norms.
Tensor attention_tile(const Model& model, const RunAnalysis& run, int layer, int head, int q0, int q1, int k0, int k1,
                      bool norm_weighted = false);

// ---- what heads move: norm-weighted attention, rollout, direct logit attribution ----
// (src/pipeline/attribute.cc; formulas in docs/metrics.md)

// Every head's norm-weighted map ‖α_qk · v_k W_O,hᵀ‖ (Kobayashi et al. 2020): [n_layer, n_head, T, T].
// Dense runs only (a streamed run keeps no maps): Error saying to add --maps dense otherwise.
Tensor norm_weighted_attention(const RunAnalysis& run);
// One head's slice of it, written to `out` [T, T] (the server's norm-weighted view). Dense runs
// only; Error when the run kept no value norms.
void norm_weighted_head(const RunAnalysis& run, int layer, int head, float* out);
// Attention rollout (Abnar & Zuidema 2020), residual included: [n_layer, T, T], slice l the
// rollout up to and including layer l. Dense runs only, as above.
Tensor attention_rollout(const RunAnalysis& run);
// Token-level maps [A, B, T, T] of this run (weights, norm-weighted, rollout) merged into its words
// as the word-level weights are: keys summed per word, query rows averaged ([A, B, U, U]).
Tensor merge_into_words(const RunAnalysis& run, const Tensor& token_maps);

struct LogitAttributionOptions {
  int32_t contrast = -1;  // >= 0: also attribute logit(target) − logit(contrast) at every position
};
// Direct logit attribution over a whole text (causal models; encoders get an Error): for every
// position the logit of the actual next token (at the last position: the model's top-1 token),
// split into embeddings, every head, every attention bias, every MLP, the final norm's bias and
// the rest (analysis::LogitAttribution); with a contrast, one more entry per position for the
// difference. Entries ordered by position, the plain logit before the difference.
std::vector<analysis::LogitAttribution> attribute_logits(const Model& model, const Encoding& encoding,
                                                         const LogitAttributionOptions& options = {});

// Token i's attention to token j in every head, strongest first, with each head's roles
// (token level). Throws Error for a token outside the run.
struct HeadLink {
  int layer = 0, head = 0;
  double weight = 0;          // a[i, j]
  double weight_no_sink = 0;  // the same with the sink columns dropped and the row renormalised
                              // (0 when j is itself a sink column)
};
std::vector<HeadLink> heads_linking(const Model& model, const RunAnalysis& run, int query, int key);

// ---- corpus evidence (src/pipeline/evidence.cc) ----

// Where the gold data is and where the cache lives. The files looked for under `data_dir`:
// ud/en_pud-ud-test.conllu (report) and ud/en_ewt-ud-dev.conllu (selection) for syntax,
// gap/gap-validation.tsv (report) and gap/gap-development.tsv (selection) for coreference. A pair
// that is missing (or a model whose language has no such data) leaves that evidence out.
struct EvidenceOptions {
  std::string data_dir;   // empty: $HEADSCOPE_DATA, else ../shared/data
  std::string cache_dir;  // empty: $HEADSCOPE_CACHE_DIR, else $XDG_CACHE_HOME/headscope, else ~/.cache/headscope
  int64_t sentences = limits::kEvidenceSentences;  // per treebank
  int64_t gap_rows = limits::kEvidenceGapRows;     // per GAP file
  bool use_cache = true;                           // false: always compute (and still write the cache)
  bool measure = true;                             // false: read the cache only; without one, return no evidence
  std::function<void(std::string_view stage, int64_t done, int64_t total)> progress;
};
struct CorpusEvidence {
  std::string key;     // the cache key (hex), see evidence_key()
  std::string path;    // the cache file read or written ("" when it could not be written)
  std::string source;  // one line: what was measured ("300 UD PUD sentences ..., 200 GAP rows ...")
  bool from_cache = false;
  bool missing = false;  // no cache and not measured (EvidenceOptions::measure off): source says so, without a remedy
  bool syntax = false, coreference = false;   // which gold data was found
  std::vector<analysis::HeadEvidence> heads;  // [n_layer * n_head]; stats left empty (the text's join in)
};
// The key: a hash of the format version, each model file's name, size and modification time
// (config.json, tokenizer.json, *.safetensors, or the .gguf), each data file's size and the
// sizes asked for. Editing or replacing any of them makes a new key.
std::string evidence_key(const std::string& model_path, const EvidenceOptions& options);
// The atlas options corpus_evidence() runs with (for a test that wants the same numbers).
analysis::AtlasOptions evidence_atlas_options(const EvidenceOptions& options);
// Reads the cached evidence of `model_path`, or measures it (progress through options.progress)
// and writes the cache. Without any gold data the evidence is the probe alone.
CorpusEvidence corpus_evidence(const Model& model, const std::string& model_path, const EvidenceOptions& options = {});

// ---- decompose ----

// Token t of layer l: the heads' outputs side by side (the concatenation that enters W_O), W_O
// applied to it, each head's contribution O_h · W_O[:, h]ᵀ, and the checks that the pieces add up.
struct Decomposition {
  int layer = 0, token = 0, n_head = 0, d_head = 0, d_model = 0, T = 0;
  std::vector<float> concat;              // [n_head * d_head]
  std::vector<float> head_output_norms;   // [n_head]
  std::vector<float> projection;          // [d_model]  W_O · concat (accumulated in double)
  std::vector<float> bias;                // [d_model]  b_O (zeros when the layer has none)
  std::vector<float> contributions;       // [n_head, d_model]
  std::vector<float> contribution_norms;  // [n_head]
  std::vector<float> attn_output;         // [d_model]  the captured attention output
  std::vector<float> attention_rows;      // [n_head, T] this token's row in every head
  double sum_max_abs_error = 0;           // max |Σ_h contribution + bias - attn_output|
  double projection_max_abs_error = 0;    // max |projection + bias - attn_output|
};
// `capture` needs attention, head outputs, contributions and the attention output. Throws Error
// for a layer or token out of range.
Decomposition decompose(const Model& model, const Capture& capture, int layer, int token);

// ---- generate ----

struct GeneratedToken {
  int64_t position = 0;
  int32_t id = 0;
  std::string text;  // the vocabulary entry
  float logit = 0;
};
struct GenerateOptions {
  int max_new_tokens = 20;
  int64_t max_length = 0;  // prompt + continuation; 0: the model's max_positions
  bool stop_at_eos = true;
  bool capture_attention = false;  // assemble Generation::attention
  // Called after each new token with it and all ids so far (for printing as it goes).
  std::function<void(const GeneratedToken&, const std::vector<int32_t>& ids)> on_token;
};
struct Generation {
  int64_t prompt_tokens = 0;
  std::vector<int32_t> ids;  // prompt + continuation
  std::vector<GeneratedToken> generated;
  bool stopped_at_eos = false;
  bool stopped_at_limit = false;  // the length limit came before max_new_tokens
  Tensor attention;               // [n_layer, n_head, T, T] with capture_attention
};
// Greedy decoding (argmax) through the KV cache: the prompt once, then one Model::extend() per
// token. Throws Error for an encoder or an empty prompt.
Generation generate(const Model& model, const Encoding& prompt, const GenerateOptions& options);

// The prompt as transformers' apply_chat_template writes it: the chat template read from
// `model_path` rendered around a user turn (and an optional system turn), encoded without the
// tokenizer's own special tokens. Throws Error when the model's files declare no template.
Encoding encode_chat(const Model& model, const std::string& model_path, const std::string& user,
                     const std::string& system = "");

// ---- what the explorer, the CLI and Python show of a run (src/pipeline/explore.cc) ----
// Each of these is a typed result with one to_json in headscope/json.h; the frontends parse their
// request, call these and print the JSON.

// The names of AnalyseOptions::Maps, in the order frontends list them: "auto", "dense", "stream".
const std::vector<std::pair<std::string, AnalyseOptions::Maps>>& maps_names();
// The mode of one of those names, or nothing for any other.
std::optional<AnalyseOptions::Maps> maps_from_name(std::string_view name);

// An encoding of pieces that come without an original text (ids given to the Python package,
// attention from elsewhere): `tokens` with id, text and special set; the non-special pieces'
// texts joined by single spaces make the text, each piece a word of its own (begin, end and
// word are filled in here). Returns the text.
std::string join_pieces(Encoding& tokens);

// Whether `text` is well-formed UTF-8 (RFC 3629: no overlong forms, no surrogates, <= U+10FFFF).
// Sets `bad_offset` to the byte offset of the first bad sequence when it is not.
bool is_valid_utf8(std::string_view text, size_t* bad_offset = nullptr);
// The number of bytes (0 to 3) at the end of `text` that begin a multi-byte character without
// completing it, e.g. 1 for "caf\xC3" and 2 for "\xF0\x9F". 0 when the text ends on a whole
// character or on bytes that can never become one (those are not held back: no later byte fixes them).
size_t incomplete_utf8_tail(std::string_view text);

// Which attention maps a run can show (docs/explorer.md "Views"): the weights; each head's
// norm-weighted map α_qk · ‖v_k W_O,hᵀ‖ with every row renormalised to sum 1; or the attention
// rollout up to each layer, one map per layer.
enum class AttentionView { kWeights, kNorm, kRollout };
// Why `view` cannot be shown for this run (streamed maps; rollout over limits::kMaxRolloutTokens),
// or nothing when it can.
std::optional<std::string> view_unavailable(const RunAnalysis& run, AttentionView view);
// The same for every view: {weights, norm, rollout}, each null or the reason.
struct ViewAvailability {
  std::optional<std::string> weights, norm, rollout;
};
ViewAvailability view_availability(const RunAnalysis& run);

// The grid of the run's pooled overviews: cell c covers tokens starts[c] .. starts[c + 1] − 1.
struct OverviewGrid {
  int cells = 0, T = 0;
  std::vector<int> starts;  // [cells + 1]
  int64_t max_tile_cells = limits::kMaxTileCells;
};
// A loaded model as GET /api/model and headscope.Model.description show it: its hyper-parameters
// (ModelConfig) with the catalogues its runs are read with (the statistics, their constants and
// kMinRoleScore, the roles worded for this model, the role families). The server adds its limits and
// corpus evidence beside these; Python adds norm_eps and eos_token_id to its Config.
struct ModelDescription {
  ModelConfig config;
};
ModelDescription describe_model(const Model& model);

// One analysed text as the explorer and Python read it (docs/schema.md): run_json() plus whether
// the maps were streamed, the overview grid (when the run kept overviews) and, for the explorer,
// which views it can show.
struct RunDocument {
  const ModelConfig* config = nullptr;
  const RunAnalysis* run = nullptr;
  Level level = Level::kToken;
  bool hide_special = false;
  std::optional<ViewAvailability> views;  // absent: not written
  std::optional<OverviewGrid> overview;
};
RunDocument run_document(const ModelConfig& config, const RunAnalysis& run, Level level, bool hide_special,
                         bool with_views);

// The maps of `view` for layers [layer or all] and heads [head or all] (the rollout: one map per
// layer), [layers, heads, U, U] at `level` (token maps merged into words as the word weights are).
// `rollout`: attention_rollout(run), needed for kRollout only. Throws Error when the run cannot
// give them (streamed, or no value norms for kNorm).
Tensor attention_view(const ModelConfig& config, const RunAnalysis& run, AttentionView view, Level level,
                      std::optional<int> layer, std::optional<int> head, const Tensor* rollout);

// One layer's pooled overview (every head, or one), or its per-key or per-offset profile.
enum class OverviewPart { kMaps, kReceived, kOffsets };
struct OverviewSlice {
  std::vector<float> values;
  std::vector<int64_t> shape;  // maps [heads, 2 (sum, max), cells, cells]; received [heads, T];
                               // offsets [heads, 2T − 1] (NaN where no query sees the offset)
};
// Throws Error when the run kept no overviews.
OverviewSlice overview_slice(const ModelConfig& config, const RunAnalysis& run, int layer, std::optional<int> head,
                             OverviewPart part);

// Token q's attention to token k in every head, strongest first (heads_linking), at most `limit`
// heads, each with its roles.
struct LinkSearch {
  int q = 0, k = 0;
  std::string query, key;    // the two tokens' labels (token_labels)
  std::string sink_columns;  // what weight_no_sink leaves out
  struct Head {
    HeadLink link;
    analysis::HeadRoles roles;
  };
  std::vector<Head> heads;
};
LinkSearch link_search(const Model& model, const RunAnalysis& run, int q, int k, int limit);

// A generation as text. The continuation is what decoding gained over the prompt's own decoding;
// byte-level tokens can stop inside a multi-byte character (the first bytes of an emoji, say):
// those bytes are held back, so that continuation and text end at the last whole character and
// stay valid UTF-8.
struct GenerationResult {
  std::string prompt;     // as given
  Generation generation;  // the ids, steps and (when captured) attention
  Encoding tokens;        // the prompt's tokens, then each generated one (its vocabulary entry)
  std::string decoded;    // the tokenizer's decoding of every id, prompt included
  std::string continuation;
  size_t held_back_bytes = 0;
  std::string held_back;  // those bytes
  std::string text;       // prompt + continuation
  // Whether `text` encodes back to exactly these ids; if not, an analysis of `text` sees other
  // tokens than the ones generated (two pieces that merge when re-encoded, or a held-back tail).
  // A text that is still not UTF-8 (the model emitted a stray byte) is not encoded: false.
  bool retokenizes_same = false;
};
// `prompt_encoding`: what generate() was given (the encoding of `prompt`, or a chat template
// around it). Decodes once and, with `check_retokenizes`, encodes `text` once.
GenerationResult describe_generation(const Model& model, std::string prompt, const Encoding& prompt_encoding,
                                     Generation generation, bool check_retokenizes = true);

// ---- atlas ----

struct AtlasFiles {
  std::string json;                  // NAME.json ("headscope.atlas/2", docs/atlas.md)
  std::string markdown;              // NAME.md
  std::vector<uint8_t> png;          // NAME.png
  std::vector<uint8_t> control_png;  // NAME-control.png (empty without a control model)
  ModelConfig config;                // of the main model
  double seconds = 0;
  std::vector<std::string> warnings;  // the models' load warnings (Model::warnings), for the frontend
};
// Loads `model_path` (and `control_path` when not empty) with `load`, builds their atlases and
// formats them. `command_line` is quoted in the report, `image_name` linked from it.
AtlasFiles make_atlas(const std::string& model_path, const std::string& control_path,
                      const analysis::AtlasOptions& options, const std::string& command_line,
                      const std::string& image_name, const LoadOptions& load = {});

// ---- an atlas's data stages in shards (src/pipeline/build_atlas.cc; docs/corpus.md, "Ray") ----

// Which items of each stage a shard runs: [begin, end) of the report and select treebanks' sentences
// and of the report and select GAP files' rows, counted after AtlasOptions::max_sentences and
// max_gap_rows; end −1: to the last.
struct AtlasShard {
  int64_t report_begin = 0, report_end = -1;
  int64_t select_begin = 0, select_end = -1;
  int64_t coref_report_begin = 0, coref_report_end = -1;
  int64_t coref_select_begin = 0, coref_select_end = -1;
};
// The shard's treebank and GAP stages on `model` (the data files of `options`, read here), as a
// partial's bytes (CBOR of "headscope.atlas_partial/2": integer counts and exact statistic sums,
// no attention map). Partials of any split, merged in any order, hold bit for bit what one pass over
// all the items counts; AtlasOptions::partial_bytes builds the atlas from them.
std::string atlas_partial_bytes(const Model& model, const analysis::AtlasOptions& options, const AtlasShard& shard);
// Partials' bytes merged, as one partial's bytes. Error for bytes that are not partials of one model shape.
std::string merge_atlas_partials(const std::vector<std::string>& parts);
// How many items each stage has for `options` (after max_sentences and max_gap_rows; GAP stages 0
// without a GAP file): {report, select, coref_report, coref_select}. Reads the files, no model.
std::array<int64_t, 4> atlas_stage_sizes(const analysis::AtlasOptions& options);
// The texts the atlas measures head importance on (AtlasOptions::importance_texts): the first
// sentences of the report treebank that fit the model untruncated (and, for decoders, have the two
// tokens a next-token loss needs). Empty when importance is off for this model.
std::vector<Encoding> atlas_importance_texts(const Model& model, const analysis::AtlasOptions& options);

// ---- the head map (src/pipeline/evidence.cc; docs/roles.md, "Head map") ----

// The head map of `model` over `texts` (each encoded with truncation; packed passes, attention
// only): analysis::HeadMap. Error when no text has a token.
analysis::HeadMap head_map(const Model& model, std::span<const std::string> texts);
// The head map over the first limits::kHeadMapTexts sentences of UD EWT dev in the gold data
// (EvidenceOptions::data_dir), cached beside the corpus evidence as
// <cache dir>/<model folder>-<evidence key>-headmap.json ("headscope.head_map/1"); measured when no
// cache holds it (and written), unless options.measure is off (then Error saying how to measure it).
analysis::HeadMap cached_head_map(const Model& model, const std::string& model_path, const EvidenceOptions& options);
// Its JSON, "headscope.head_map/1": headscope/json.h (head_map_json).

// ---- head ablation (src/pipeline/ablate.cc; docs/causal.md) ----

// Heads written "layer.head" (0-based), comma-separated: "3.1,2.8". Throws Error naming the item
// for anything else (empty items, signs, a layer or head the model lacks, a head named twice).
std::vector<HeadRef> parse_heads(std::string_view spec, const ModelConfig& config);
// "zero", "mean", "resample"; Error for any other name.
Ablation::Mode parse_ablation_mode(std::string_view name);
const char* ablation_mode_name(Ablation::Mode mode);

struct AblateOptions {
  Ablation::Mode mode = Ablation::Mode::kZero;
  // The reference corpus: mean outputs (kMean) and donor texts (kResample). Empty: the texts
  // themselves (a text is then never its own donor).
  std::vector<Encoding> reference;
  uint64_t seed = 0;  // which donor text each text gets, and donor positions past a donor's end
};

// What ablating a set of heads did to one text.
struct TextEffect {
  int T = 0;
  int donor = -1;  // kResample: the reference text whose head outputs were used
  // Decoders: the next-token loss −log p(token t+1 | tokens ≤ t) at t = 0 .. T − 2, before and
  // after, and the rows whose top-1 next token changed.
  std::vector<float> loss_before, loss_after;
  double mean_loss_before = 0, mean_loss_after = 0;
  std::vector<int> top1_changed;  // positions t whose argmax changed
  // The prediction after the last token (row T − 1): its top-1 token id and softmax probability.
  int last_top1_before = -1, last_top1_after = -1;
  double last_p_before = 0, last_p_after = 0;
  std::string last_text_before, last_text_after;  // those two tokens decoded on their own
  // Encoders: 1 − cos of the mean-pooled sentence embeddings (mean over the T tokens of the last
  // hidden state; cosine, so the model's own normalisation changes nothing).
  double embedding_distance = 0;
  // Both: ‖h′_l − h_l‖ / ‖h_l‖ of hidden_states slot l = 1 .. n_layer (Frobenius over [T, d_model]).
  std::vector<double> layer_change;
};

struct AblationResult {
  std::vector<HeadRef> heads;
  std::vector<TextEffect> texts;
  // Mean over texts of the effect: decoders Δ mean loss (after − before), encoders 1 − cos.
  double effect = 0;
};

struct HeadImportance {
  HeadRef head;
  double ablation = 0;  // AblationResult::effect of ablating this head alone
  double proxy = 0;     // mean over texts and tokens of ‖contribution_h(t)‖ / ‖x_l(t)‖, x_l entering layer l
  int rank = 0;         // 1 = the largest ablation effect (rank_importance; 0 before ranking)
};

// What every head's importance takes from each text: per text and head (layer-major), the effect of
// ablating the head alone on that text and its proxy term. Texts are independent (zero ablation; a
// packed pass's numbers do not depend on its companions), so the parts of two shards of a corpus,
// concatenated in corpus order, are the parts of the whole corpus, and importance_from_parts gives
// the whole corpus's importance bit for bit (on one build of headscope).
struct ImportanceParts {
  int n_layer = 0, n_head = 0;
  bool causal = false;
  std::vector<double> effect;  // [texts, n_layer · n_head]: Δ mean loss (decoders) or 1 − cos (encoders)
  std::vector<double> proxy;   // [texts, n_layer · n_head]: mean over the text's tokens of ‖c_h(t)‖ / ‖x_l(t)‖
  std::vector<int64_t> tokens;  // [texts]
  size_t texts() const { return tokens.size(); }
  // Appends `more` (same model shape; Error otherwise).
  void append(const ImportanceParts& more);
};

// One point of a pruning curve: the first `removed` heads of an order ablated together.
struct PruningPoint {
  int removed = 0;
  double effect = 0;  // AblationResult::effect
  double change = 0;  // decoders: relative loss change (after − before) / before; encoders: 1 − cos
};

// The clean runs of a set of texts and what an ablation mode needs from the reference corpus,
// computed once; then any number of ablations. Each ablation reruns only the layers from the
// lowest ablated layer on (Model::resume from the clean run's residual stream).
class Ablator {
 public:
  Ablator(const Model& model, std::vector<Encoding> texts, AblateOptions options);
  const std::vector<Encoding>& texts() const { return texts_; }
  const AblateOptions& options() const { return options_; }
  const Model& model() const { return model_; }
  const Tensor& mean_outputs() const { return mean_; }  // [n_layer, n_head, d_head] (kMean)

  // The heads together (empty: the plain model, every effect 0).
  AblationResult ablate(const std::vector<HeadRef>& heads) const;
  // Every head alone, in layer-major order, with the proxy (unranked; see measure_importance).
  std::vector<HeadImportance> importance() const;
  // The same, per text (ImportanceParts); importance() is importance_from_parts of these.
  ImportanceParts importance_parts() const;
  // Heads of `order` removed cumulatively; a point after every `step` heads (and the last).
  std::vector<PruningPoint> pruning_curve(const std::vector<HeadRef>& order, int step) const;

 private:
  // What the plain model gives on one text, kept for every ablation.
  struct Clean {
    Tensor hidden;               // [n_layer + 1, T, d_model]: where a resumed pass starts
    std::vector<float> loss;     // decoders: [T − 1] next-token loss
    std::vector<int> top1;       // decoders: [T] argmax of each row's logits
    double last_p = 0;           // decoders: softmax probability of top1[T − 1] in row T − 1
    std::vector<double> pooled;  // encoders: [d_model] mean-pooled last hidden state
  };
  Clean summarise(const Encoding& text, Capture&& capture) const;
  TextEffect compare(size_t text, Capture&& ablated) const;

  const Model& model_;
  std::vector<Encoding> texts_;
  AblateOptions options_;
  std::vector<Clean> clean_;                        // [texts]
  std::vector<std::pair<size_t, size_t>> batches_;  // the texts' packed passes, [begin, end)
  Tensor mean_;                                     // [n_layer, n_head, d_head] (kMean)
  std::vector<Tensor> donors_;                      // [reference texts] head outputs (kResample)
  std::vector<int> donor_of_;                       // [texts] the donor of each text (kResample)
};

// Spearman's rank correlation of x and y (ties get their mean rank); NaN when undefined.
double spearman(const std::vector<double>& x, const std::vector<double>& y);

// ---- the results of the causal experiments (src/pipeline/ablate_results.cc; JSON in json.h) ----

// Wall and CPU seconds (CPU summed over all threads: the machine may be shared, so both).
struct Seconds {
  double wall = 0, cpu = 0;
};

// Sets each head's rank: 1 for the largest ablation effect, ties in the order given (layer-major).
void rank_importance(std::vector<HeadImportance>& heads);
// The heads from the largest ablation effect to the smallest (rank order).
std::vector<HeadImportance> by_rank(const std::vector<HeadImportance>& heads);

// Every head's importance on the ablator's texts, ranked, with the proxy's rank correlation.
struct ImportanceResult {
  int n_layer = 0, n_head = 0;
  bool causal = false;
  Ablation::Mode mode = Ablation::Mode::kZero;
  int64_t tokens = 0;                 // summed over the texts
  std::vector<HeadImportance> heads;  // layer-major, ranked
  double spearman = 0;                // Spearman of ablation vs proxy over the heads (NaN: undefined)
  Seconds seconds;                    // of the per-head ablations and the proxy
};
ImportanceResult measure_importance(const Ablator& ablator);
// Every head's importance over the texts of `parts`, in their order: each head's effect and proxy
// averaged over the texts (summed in text order), ranked, with Spearman's rho; zero ablation.
// Error for parts with no text or inconsistent sizes. seconds stay 0 (the parts' work was elsewhere).
ImportanceResult importance_from_parts(const ImportanceParts& parts);
std::vector<HeadImportance> head_importance(const ImportanceParts& parts);

// A set of heads ablated together in one text (what POST /api/ablate answers).
struct TextAblation {
  std::vector<HeadRef> heads;
  Ablation::Mode mode = Ablation::Mode::kZero;
  bool causal = false;
  std::string reference;  // where mean / resample take head outputs from; empty for zero ablation
  double effect = 0;      // AblationResult::effect
  TextEffect text;
};
// `reference`: the texts for mean and resample (unused in zero mode), described by `reference_name`.
TextAblation ablate_text(const Model& model, const Encoding& text, const std::vector<HeadRef>& heads,
                         Ablation::Mode mode, const std::vector<std::string>& reference,
                         const std::string& reference_name);

// The number of heads removed before the first point whose |change| reaches 1 % (Michel et al. 2019).
int removable_heads(const std::vector<PruningPoint>& curve);

struct PruneOptions {
  int step = 1;           // heads added between two points of a curve
  int random_orders = 1;  // random orders, drawn with seeds seed, seed + 1, ...
  uint64_t seed = 0;
  bool held_out = false;  // whether the curves' ablator holds other texts than the importance's
};

// Pruning curves: the heads removed least important first, against random orders of the same heads.
struct PruningResult {
  size_t texts = 0;  // the texts the curves are measured on
  bool held_out = false;
  std::vector<PruningPoint> importance_order;
  std::vector<std::vector<PruningPoint>> random_orders;
  struct Point {
    int removed = 0;
    double change_mean = 0, change_sd = 0;  // over the random orders (sample sd; 0 for one order)
  };
  std::vector<Point> random_summary;
  double removable_share_importance = 0;
  std::vector<double> removable_shares_random;  // one per random order
  double removable_share_mean = 0, removable_share_sd = 0;
  Seconds seconds;
};
PruningResult prune_heads(const Ablator& curves, const ImportanceResult& importance, const PruneOptions& options);

// `headscope ablate`'s document ("headscope.ablate/1"): either `result` (heads ablated together)
// or `importance` (every head alone), the latter optionally with `pruning`.
struct AblationExperiment {
  ModelConfig model;
  Ablation::Mode mode = Ablation::Mode::kZero;
  uint64_t seed = 0;
  size_t texts = 0;
  std::optional<AblationResult> result;
  std::optional<ImportanceResult> importance;
  std::optional<PruningResult> pruning;
};
// What the experiment measures: "delta mean next-token loss" or "1 - cos of the mean-pooled embedding".
const char* ablation_measure(const ModelConfig& config);

// ---- circuits: activation and path patching (src/pipeline/patch.cc; docs/circuits.md) ----

// Where a patching experiment's prompt pairs come from: one pair written out, a pairs file's JSON
// (prompt_pairs_from_json), or a task generated for the model ("ioi", "induction", "greater_than").
struct PairSource {
  std::string clean, corrupt, answer, wrong;  // one pair (answers: decoders only)
  std::string pairs_json, pairs_name;         // a pairs file's contents and its name (for messages)
  std::string task;
  int n = 20;       // pairs a task generates
  int length = 10;  // induction: random tokens per half
  uint64_t seed = 0;
};
// Exactly one of the three must be given; throws Error otherwise and for anything check_pairs refuses.
PromptPairs load_prompt_pairs(const Model& model, const PairSource& source);

// How an estimate of every site's effect agrees with the exact patching of the same sites:
// Spearman's ρ and Pearson's r of the patched metrics over the sites, the sites among the exact
// top 10 (by |normalised effect|) that the estimate also ranks in its top 10, and the sites the
// estimate misranks most (the largest |rank difference|, up to 10).
struct PatchAgreement {
  double spearman = 0, pearson = 0;
  int top10_shared = 0;
  int64_t sites = 0;
  std::vector<size_t> misranked;  // indices into the sweep's effects
};
PatchAgreement patch_agreement(const PatchReport& exact, const PatchReport& estimate);

// `headscope patch`'s document ("headscope.patch/1"), also POST /api/patch's reply: a sweep or a
// path patch over a set of pairs.
struct PatchExperiment {
  ModelConfig model;
  std::string task;
  uint64_t seed = 0;
  std::optional<PatchReport> sweep;
  std::optional<PathPatchReport> path;
  std::optional<HeadSetEffect> set;  // heads patched together, with:
  PatchMetric set_metric = PatchMetric::kLogitDiff;
  PatchDirection set_direction = PatchDirection::kDenoise;
  // Attribution patching (docs/gradients.md): the first-order estimate of the sweep's sites (and
  // edges); with `sweep` too (method "both"), how far the two agree over the sites.
  std::optional<AttributionReport> attribution;
  std::optional<PatchAgreement> agreement;
  Seconds seconds;
  Seconds attribution_seconds;
};
PatchExperiment run_patch_sweep(const Model& model, PromptPairs& pairs, const PatchRequest& request);
PatchExperiment run_path_patch(const Model& model, PromptPairs& pairs, const PathPatchRequest& request);
PatchExperiment run_head_set_patch(const Model& model, PromptPairs& pairs, const std::vector<HeadRef>& heads,
                                   PatchDirection direction, PatchMetric metric);
// Attribution patching of the request's sites (and edges): alone, or with `exact` beside the exact
// sweep of the same sites and their agreement.
PatchExperiment run_attribution_patch(const Model& model, PromptPairs& pairs, const AttributionRequest& request,
                                      bool exact);
// A sweep in parts (circuits.h, PatchParts, patch_sweep_parts), for a job split over shards of a
// dataset of pairs: one shard's parts as bytes ("headscope.patch_parts/1" in CBOR: every double exact), read back with
// patch_parts_from_bytes (Error for anything else), and the experiment of all the pairs' parts
// appended in dataset order — the document run_patch_sweep writes for the whole dataset, with the
// seconds given (the shards' work was elsewhere).
std::string patch_parts_to_bytes(const PatchParts& parts);
PatchParts patch_parts_from_bytes(std::string_view bytes);
PatchExperiment patch_experiment_from_parts(const ModelConfig& model, const std::string& task, uint64_t seed,
                                            const PatchParts& parts, Seconds seconds);

// One CSV row per result: site,layer,head,position,value,normalised (path patching:
// receivers,input,value,normalised).
std::string patch_csv(const PatchExperiment& experiment);

// ---- gradients of one text and token saliency (src/pipeline/grad.cc; docs/gradients.md) ----

// What to differentiate: a patching metric at the text's last position (decoders: logit_diff of
// answer against wrong, prob or loss of answer; encoders: cosine, 1 − cos of the sentence
// embedding with the reference text's), and which gradients to keep.
struct GradientRequest {
  PatchMetric metric = PatchMetric::kLogitDiff;
  std::string answer, wrong;  // decoders: tokens after the text (wrong: logit_diff only)
  std::string reference;      // encoders: the text the cosine compares with
  bool attention = true, queries_keys_values = true, receivers = false;
};
// "headscope.grad/1": the model, the text and its tokens, the metric and its value, and for every
// gradient tensor its shape and largest |entry|; per layer the norm of ∂metric/∂(residual stream
// entering it), per token the norm of ∂metric/∂(its embedding) and gradient × input.
struct TextGradients {
  ModelConfig model;
  std::string text;
  Encoding encoding;
  GradientRequest request;
  int32_t answer_id = -1, wrong_id = -1;
  Gradients grads;
  Seconds seconds;
  std::vector<std::pair<std::string, const Tensor*>> tensors() const;  // name → gradient, the non-empty ones
};
// Throws Error for what the metric needs and lacks (answer tokens, a reference text), a text the
// model refuses, and ResourceError over the memory budget (Model::gradient_bytes).
TextGradients text_gradients(const Model& model, const std::string& text, const GradientRequest& request);

// "headscope.saliency/1": the model, the text's tokens, the method, its options, the metric at the
// text (and at the baseline), per-token scores, their total and the completeness gap.
struct SaliencyExperiment {
  ModelConfig model;
  std::string text;
  SaliencyReport report;
  Seconds seconds;
};
SaliencyExperiment run_saliency(const Model& model, const std::string& text, const SaliencyRequest& request);

// ---- circuits: the logit lens of one text (src/pipeline/lens.cc; the lens itself: circuits.h) ----

// What to read at one position of one text. The full [n_layer + 1, vocab] logits are always
// computed (the top tokens need them); keep_logits hands them back as well (Gemma 3's vocabulary of
// 262,144 makes them 19 × 1 MiB in float32), else only the top tokens and the tracked ones are kept.
struct TextLensOptions {
  int64_t position = -1;        // the token read: 0 .. T − 1, or from the end (−1 the last)
  int top_k = 10;               // tokens kept per layer, largest logit first (1 .. vocab)
  std::vector<int32_t> tokens;  // ids whose logit, probability and rank are read at every layer
  bool keep_logits = false;
};
struct TextLens {
  Encoding encoding;     // the text's T tokens
  int64_t position = 0;  // the position read, 0 .. T − 1
  int64_t vocab = 0;
  int n_rows = 0;                              // n_layer + 1: row 0 the embeddings, row n_layer the model's logits
  std::vector<std::vector<LensToken>> top;     // [n_rows][top_k]
  std::vector<std::vector<LensToken>> tokens;  // [n_rows][tokens.size()], in the order asked
  Tensor logits;                               // [n_rows, vocab] with keep_logits, else empty
};
// Runs `encoding` once (hidden states only) and reads every layer's residual stream at the position
// through the final norm and the unembedding. Throws Error for an encoder (the lens needs a
// decoder's next-token readout), a position outside the text, top_k < 1 or an id outside the
// vocabulary.
TextLens text_logit_lens(const Model& model, const Encoding& encoding, const TextLensOptions& options);
// The id of one token written as text (" Paris", with its leading space): Error unless the model's
// tokenizer makes exactly one token of it.
int32_t lens_token_id(const Model& model, const std::string& text);

struct LensRequest {
  int position = -1;  // the position read; -1: the last token
  int top_k = 10;     // tokens listed per layer
  // Tokens followed through the layers (their rank and probability at every layer), each written
  // as it would follow the text (" Paris"), one token each. Empty: the model's own prediction, the
  // top-1 token of the last layer.
  std::vector<std::string> tokens;
};
struct LensEntry {
  LensToken token;
  std::string text;  // the token as the tokenizer decodes it alone
};
struct LensLayer {
  int layer = 0;               // 0: the embeddings; l: the residual stream after layer l (n_layer: the model's logits)
  std::vector<LensEntry> top;  // top_k, largest logit first
  std::vector<LensEntry> followed;  // one per followed token, in the request's order
};
struct LogitLensResult {
  ModelConfig model;
  std::string text;
  Encoding encoding;  // of `text`
  int position = 0;
  int top_k = 0;
  bool followed_prediction = false;  // the request named no tokens: the prediction is followed
  std::vector<LensLayer> layers;     // n_layer + 1
};
// text_logit_lens (above) with tokens written as text and their decoded text beside each entry,
// as the server replies ("headscope.lens/1"). Throws Error as text_logit_lens does, and for top_k
// over limits::kMaxLensTopK, more than limits::kMaxLensTokens tokens, or a followed token that is
// not exactly one token.
LogitLensResult logit_lens_text(const Model& model, std::string text, Encoding encoding, const LensRequest& request);

// ---- circuits: one head's logit lens (src/pipeline/lens.cc; the linearisation: analysis/attribution.h) ----

// One token as one head moves it: the head's direct effect on its logit (through the norms
// linearised at the run's own scales, before a final soft-cap) and its rank among that head's
// effects on the whole vocabulary (0: the token the head raises most, as the logit lens counts).
struct HeadLensToken {
  int32_t id = 0;
  double logit = 0;
  int64_t rank = 0;
  double model_logit = 0;  // the model's own logit of the token at the position (before a soft-cap)
};
struct HeadLensOptions {
  int layer = 0, head = 0;
  int64_t position = -1;        // 0 .. T − 1, or from the end (−1 the last)
  int top_k = 10;               // tokens raised most and lowered most (1 .. vocab)
  std::vector<int32_t> tokens;  // ids followed; empty: the model's prediction at the position
  bool keep_logits = false;     // hand back the head's effect on every logit
};
struct HeadLens {
  Encoding encoding;
  int64_t position = 0;  // 0 .. T − 1
  int layer = 0, head = 0, kv_head = 0;
  int64_t vocab = 0;
  std::vector<HeadLensToken> promoted;    // top_k, largest effect first
  std::vector<HeadLensToken> suppressed;  // top_k, most negative first
  std::vector<HeadLensToken> tokens;      // the followed ones, in the order asked
  bool followed_prediction = false;       // no tokens were asked: the prediction is followed
  std::vector<double> logits;             // [vocab] with keep_logits
};
// Runs `encoding` once (contributions, block outputs, hidden states) and reads one head's
// contribution at the position through the unembedding (analysis::head_logits). Throws Error for
// an encoder, a head, position or id outside the model or text, or top_k < 1.
HeadLens text_head_lens(const Model& model, const Encoding& encoding, const HeadLensOptions& options);

struct HeadLensRequest {
  int layer = 0, head = 0;
  int position = -1;
  int top_k = 10;
  std::vector<std::string> tokens;  // written as they would follow the text, one token each
};
struct HeadLensEntry {
  HeadLensToken token;
  std::string text;  // the token as the tokenizer decodes it alone
};
struct HeadLensResult {
  ModelConfig model;
  std::string text;
  Encoding encoding;
  int position = 0, layer = 0, head = 0, kv_head = 0, top_k = 0;
  bool followed_prediction = false;
  std::vector<HeadLensEntry> promoted, suppressed, followed;
};
// text_head_lens with tokens written as text and decoded beside each entry ("headscope.head_lens/1",
// the server's and the CLI's reply). Throws Error as text_head_lens does, and for top_k over
// limits::kMaxLensTopK, more than limits::kMaxLensTokens tokens, or a token that is not one token.
HeadLensResult head_lens_text(const Model& model, std::string text, Encoding encoding, const HeadLensRequest& request);

}  // namespace headscope
