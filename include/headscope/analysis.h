// headscope — what the analysis says about a head, as plain data: per-head statistics, token
// kinds, roles with their evidence, and the token → word map. Frontends read these types; the
// functions that compute them are behind the pipeline (headscope/pipeline.h). The formulas are in
// docs/metrics.md, the JSON shape of each type in docs/schema.md.
#pragma once
#include <array>
#include <cstdint>
#include <functional>
#include <limits>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace headscope::analysis {

// ---- statistics (computed in src/analysis/statistics.cc) ----

// A weight below kSparsityFraction / n (n = attendable keys of the query, so 1/n is the uniform
// share) counts as negligible for `sparsity`. Relative to uniform so that the number means the same
// for a 10-token and a 300-token sequence.
inline constexpr double kSparsityFraction = 0.1;
// `keys_90`: the fewest keys whose weights add up to this share of the row.
inline constexpr double kCoverMass = 0.9;
// `local_mass`: keys with 1 <= |k - q| <= kLocalWindow.
inline constexpr int kLocalWindow = 3;
// `offset_mass` covers signed offsets d = k - q in [-kMaxOffset, kMaxOffset].
inline constexpr int kMaxOffset = 8;
inline constexpr int kOffsetSlots = 2 * kMaxOffset + 1;

enum class TokenKind : uint8_t {
  kContent = 0,  // an ordinary piece of text
  kPunct = 1,    // every character of its text span is Unicode punctuation
  kSpecial = 2,  // added by the template: [CLS], [SEP], <s>, BOS, EOS
};

// What the statistics need to know about one sequence of T positions (tokens, or word units
// after merging, see words.h).
struct SequenceInfo {
  std::vector<TokenKind> kinds;     // [T]
  std::vector<int32_t> ids;         // [T] token ids, for duplicate_mass; empty: that field stays NaN;
                                    //     a negative id never matches anything
  std::vector<uint8_t> attendable;  // [T] 0 = padding key, never attended; empty: all keys valid
  bool causal = false;              // query q sees keys k <= q only (decoders)
  int64_t window = 0;               // with causal: q sees only keys with q − k < window (a
                                    //     sliding-window layer, ModelConfig::window); 0 = no window

  int T() const { return static_cast<int>(kinds.size()); }
  // The first key query q may see through the window (0 without one).
  int first_key(int q) const {
    return causal && window > 0 && q - window + 1 > 0 ? static_cast<int>(q - window + 1) : 0;
  }
  // Whether query q may attend to key k under the mask.
  bool may_attend(int q, int k) const {
    return (!causal || (k <= q && k >= first_key(q))) &&
           (attendable.empty() || attendable[static_cast<size_t>(k)] != 0);
  }
};

struct HeadStats {
  int64_t n_queries = 0;  // queries averaged over (each with >= 1 attendable key)

  // The four statistics of the lesson page.
  double entropy_bits = 0;     // H(row) = -Σ a log2 a, mean over queries
  double entropy_norm = 0;     // H / log2(n), in [0, 1]; queries with n = 1 are left out of this mean
  double sparsity = 0;         // share of attendable weights below kSparsityFraction / n
  double keys_90 = 0;          // fewest keys covering kCoverMass of the row (mean count)
  double keys_90_share = 0;    // keys_90 / n, in (0, 1]
  double max_attention = 0;    // mean of row maxima
  double avg_attention = 0;    // Σ_k a_k² per row: the average weight *where the attention lands*
                               // (uniform: 1/n, one-hot: 1); see docs/metrics.md for why
  double uniform_overlap = 0;  // Σ_k min(a_k, 1/n): share of the row that a uniform row shares

  // Position.
  double mean_distance = 0;  // Σ a_k |k - q|
  double mean_offset = 0;    // Σ a_k (k - q); negative = looks back
  double self_mass = 0;      // a_q
  double prev_mass = 0;      // a_{q-1}, mean over the queries that may attend to q-1 (= offset(-1))
  double next_mass = 0;      // a_{q+1}, same rule (= offset(+1)); NaN for causal models
  double local_mass = 0;     // Σ over 1 <= |k - q| <= kLocalWindow
  // Mean of a_{q+d} over the queries for which q + d is attendable, d = slot - kMaxOffset
  // (slot kMaxOffset is d = 0, the self mass). NaN where no query had such a key.
  std::array<double, kOffsetSlots> offset_mass{};

  // Token kinds.
  // first_mass, sink_mass and sink_mass_norm are means over the n_sink_queries queries whose
  // window holds the first position (every query without a sliding window); the other fields of
  // this group over all n_queries.
  int64_t n_sink_queries = 0;
  double first_mass = 0;        // a_0: the first position ([CLS] or BOS or the first word)
  double special_mass = 0;      // on TokenKind::kSpecial keys
  double end_special_mass = 0;  // on special keys after position 0 ([SEP], EOS)
  double sink_mass = 0;         // on the first position or any special key (the "sink" set)
  // The sink share under norm weighting (Kobayashi et al. 2020): Σ_sink a_k ‖f(x_k)‖ / Σ_k a_k ‖f(x_k)‖,
  // f(x_k) = v_k W_O,hᵀ. Token level of a run with value norms only; NaN elsewhere.
  double sink_mass_norm = 0;
  double punct_mass = 0;    // on TokenKind::kPunct keys
  double content_mass = 0;  // on TokenKind::kContent keys other than the query itself

  // Repetition: mean mass on the other positions holding the same token id, over the queries
  // whose id occurs at another attendable position. NaN when no such query (or no ids).
  double duplicate_mass = 0;
  int64_t n_duplicate_queries = 0;

  double offset(int d) const { return offset_mass[static_cast<size_t>(d + kMaxOffset)]; }
};

// What a head's statistics over one text (or many) are made of before the means are taken: the
// sums over query rows and how many rows each has (a corpus adds them up; CorpusStats). The order
// of the entries is HeadStatsAccumulator's (src/analysis/statistics.cc); nothing but that class
// and CorpusStats reads them.
struct StatSums {
  std::vector<double> sums;
  std::vector<int64_t> counts;
};

// ---- the catalogue of statistics (src/analysis/statistics_catalogue.cc) ----

// What a HeadStats field holds: a mean over queries (NaN where there was no sample), a count of
// queries, or offset_mass's per-offset means.
enum class StatKind : uint8_t { kMean = 0, kCount, kOffsets };
// A constant a statistic's formula reads (one of the k* constants above), by its JSON name.
struct StatConstant {
  std::string_view name;  // "sparsity_fraction"
  double value;
  bool integer;  // written as an integer (local_window, max_offset)
};
// One statistic of HeadStats, described for every frontend: the JSON key, how to label and read it,
// and the constants of its formula (docs/metrics.md). The labels and help texts that quote a
// constant are worded from it, so they change with it.
struct StatInfo {
  std::string_view key;  // the HeadStats field and its JSON key: "sparsity"
  StatKind kind;
  std::string label;      // "Sparsity"
  std::string_view unit;  // bits, ratio, share, weight, keys, positions, queries
  std::string help;       // one sentence or two, for a tooltip
  std::vector<StatConstant> constants;
  double HeadStats::*mean = nullptr;    // kMean: the field
  int64_t HeadStats::*count = nullptr;  // kCount: the field
};
// Every HeadStats field once, in the order of docs/schema.md.
std::span<const StatInfo> statistics_catalogue();
// The constants the statistics read (kSparsityFraction, kCoverMass, kLocalWindow, kMaxOffset).
std::span<const StatConstant> statistic_constants();

// ---- direct logit attribution (computed in src/analysis/attribution.cc) ----

// The logit of `target` at `position` (minus the logit of `contrast`, when contrast >= 0) split into
// what each part of the final residual stream writes along the readout direction, with the final
// norm linearised at the run's own scale (docs/metrics.md). embeddings + Σ heads + Σ attention_bias
// + Σ mlp + final_norm_bias + rest = logit; rest is float rounding only (|rest| < 1e-4).
struct LogitAttribution {
  int position = 0;
  int32_t target = 0;
  int32_t contrast = -1;               // -1: the plain logit of target
  double logit = 0;                    // what the model computed (from its own final normalised stream)
  double embeddings = 0;               // token (+ position) embeddings
  std::vector<double> heads;           // [n_layer · n_head], index layer · n_head + head
  std::vector<double> attention_bias;  // [n_layer] b_O (0 for models without one)
  std::vector<double> mlp;             // [n_layer] each feed-forward block
  double final_norm_bias = 0;          // β · u of a final LayerNorm (0 for RMSNorm)
  double rest = 0;                     // logit − Σ of the parts above
};

// ---- roles (scored in src/analysis/roles.cc; the scale is explained at the top of roles.h) ----

enum class Role : uint8_t {
  kPreviousToken = 0,
  kNextToken,
  kSelf,
  kFixedOffset,     // a fixed offset other than -1, 0, +1 (detail: "+2", "-3", ...)
  kSink,            // first token / special tokens ([CLS], [SEP], BOS)
  kBroad,           // near-uniform over the attendable keys
  kLocalWindow,     // spread over the neighbours within kLocalWindow, no single offset dominating
  kDuplicateToken,  // earlier/other occurrences of the same token
  kInduction,       // the token after the previous occurrence of the current token
  kSyntactic,       // the gold dependency head / dependent (detail: relation and direction)
  kCoreference,     // the antecedent of a pronoun (GAP)
  kMixed,           // no role scores at least kMinRoleScore
  kDormant,         // causal models: nearly all weight on the sink and almost nothing written (SinkEvidence)
};
inline constexpr int kRoleCount = 13;
inline constexpr double kMinRoleScore = 0.25;
// A causal head is dormant when at least kDormantSinkMass of its attention rests on the sink and
// what it writes, Σ_k a_k ‖f(x_k)‖ (f(x_k) = v_k W_O,hᵀ), is at most kDormantWritten times the
// attention-weighted mean norm of its other keys: it reads the sink, whose value is small, and adds
// almost nothing (Guo et al. 2024, "active-dormant" heads). See SinkEvidence::written.
inline constexpr double kDormantSinkMass = 0.80;
inline constexpr double kDormantWritten = 0.25;

// The families the lesson groups roles in (src/analysis/roles.cc has each family's words).
enum class RoleFamily : uint8_t {
  kPositional = 0,  // previous, next, self, fixed offset, local window
  kSyntactic,       // one per dependency relation
  kCoreference,
  kInductionCopy,  // induction and duplicate-token heads
  kBroad,          // bag-of-words averaging
  kSink,           // sink / no-op
  kOther,          // mixed: no family explains the head
};
inline constexpr int kRoleFamilyCount = 7;
struct RoleFamilyInfo {
  RoleFamily family;
  std::string_view id;           // "positional"
  std::string_view name;         // "Positional"
  std::string_view description;  // what heads of the family do, in a sentence or two
};
std::span<const RoleFamilyInfo> role_families();
const RoleFamilyInfo& role_family_info(RoleFamily family);

struct RoleInfo {
  Role role;
  std::string_view id;                // stable identifier for JSON and URLs: "previous_token"
  std::string_view name;              // "Previous token"
  std::string_view description;       // what the attention pattern looks like
  std::string_view typical_function;  // what such heads are thought to do in trained models
  std::string_view literature;        // where the pattern was described
  uint32_t color;                     // 0xRRGGBB, used by the atlas grid and the explorer
  RoleFamily family;                  // the lesson's grouping
};
// A role's description worded for a model: an encoder's sink names [CLS] and [SEP], a decoder's
// the first token (BOS); next-token heads are not offered to causal models.
std::string role_description(Role role, bool causal);

// All roles, indexed by static_cast<int>(Role).
std::span<const RoleInfo> role_catalogue();
const RoleInfo& role_info(Role role);
// Inverse of RoleInfo::id; throws Error naming the unknown id.
Role role_from_id(std::string_view id);

// Evidence measured outside the corpus statistics; every part is optional.
struct ProbeEvidence {   // from a run over random tokens repeated twice (see probe.h)
  double induction = 0;  // mean attention from a second-copy token to the token after its first copy
  double duplicate = 0;  // mean attention from a second-copy token to its own first copy
  int probe_length = 0;  // tokens in one copy
};
struct SyntaxEvidence {            // the head's best dependency relation (see syntax.h)
  std::string relation;            // "nsubj"
  bool head_to_dependent = false;  // false: dependent attends to its head
  double accuracy = 0;             // on the report set (PUD)
  double baseline_accuracy = 0;    // best fixed offset for this relation, same set
  int baseline_offset = 0;
  int64_t support = 0;    // dependents of this relation in the report set
  int64_t sentences = 0;  // sentences of the report set (0: not recorded)
};
struct CorefEvidence {  // GAP pronoun → correct candidate (see coref.h)
  double accuracy = 0;
  double baseline_accuracy = 0;
  std::string baseline_name;  // "nearest candidate"
  int64_t support = 0;
};

// Causal models: where a head's attention rests. Nearly every decoder head puts much of each row on
// the first token, which every query can read (the attention sink, Xiao et al. 2023): that says
// where the head parks its weight, not what it does. Its roles are then read from the rows without
// the sink (the first position and the specials dropped, each row renormalised: HeadEvidence::stats),
// and these shares, of the whole rows, are kept as evidence.
struct SinkEvidence {
  double sink_mass = 0;                                              // HeadStats::sink_mass of the whole rows
  double first_mass = 0;                                             // HeadStats::first_mass of the whole rows
  double sink_mass_norm = std::numeric_limits<double>::quiet_NaN();  // norm-weighted (NaN without value norms)
  // What the head writes relative to its other keys: Σ_k a_k ‖f(x_k)‖ over the attention-weighted
  // mean ‖f(x_k)‖ of the keys outside the sink, (1 − sink_mass) / (1 − sink_mass_norm) (exact per
  // row; here from the means over rows). 1: as much as its other keys' values; near 0: almost
  // nothing (the sink's value is small). NaN without value norms.
  double written() const;
};

struct HeadEvidence {
  HeadStats stats;  // token level, over the corpus (causal models with `sink`: the rows without the sink)
  std::optional<ProbeEvidence> probe;
  std::optional<SyntaxEvidence> syntax;
  std::optional<CorefEvidence> coref;
  std::optional<SinkEvidence> sink;
};

struct RoleScore {
  Role role = Role::kMixed;
  double score = 0;      // [0, 1], see the top of this file
  std::string detail;    // "+2" for kFixedOffset, "nsubj (dependent → head)" for kSyntactic
  std::string evidence;  // one sentence in words: "62 % of its attention goes to the previous token"
};

// How every frontend names a scored role: its name, then its detail when it has one
// ("Previous token", "Fixed offset +2", "Syntactic nsubj (dependent → head)").
std::string role_label(const RoleScore& score);

struct HeadRoles {
  std::vector<RoleScore> scores;  // every role that could be scored, best first
  RoleScore primary;
  RoleScore secondary;
  double confidence = 0;  // primary.score (for kMixed: the best score that fell short)
  double margin = 0;      // primary.score - secondary.score
};

// ---- the head map (src/analysis/head_map.h; pipeline.h, head_map) ----

// Every head of a model placed by how alike its attention is to every other head's over a corpus:
// distance = √(mean Jensen–Shannon divergence, bits) of two heads' attention rows on the same query
// rows; (x, y) their classical MDS. Head i = layer · n_head + head.
struct HeadMap {
  int n_layer = 0, n_head = 0;
  int64_t texts = 0, rows = 0;      // texts and query rows compared
  std::vector<double> distance;     // [N, N] row-major, 0 on the diagonal
  std::vector<double> x, y;         // [N] the map
  std::vector<double> eigenvalues;  // [2] the MDS's two leading eigenvalues, largest first
  double explained = 0;             // their share of the positive eigenvalue mass
};

// ---- this text in words (src/analysis/links.cc) ----

// One link of a head on one text: query token → key token, with the weight after the sink
// columns (position 0 and every special token) were dropped and the row renormalised.
struct TextLink {
  int query = 0, key = 0;
  double weight = 0;      // renormalised without the sink columns
  double raw_weight = 0;  // as the model wrote it
};
// What a head does on this text: its strongest links, and whether they match its corpus role.
struct TextEvidence {
  std::vector<TextLink> links;     // each query's strongest non-sink, non-self key, best first
  std::string links_text;          // "'it' → 'trophy' 0.58; 'the' → 'suitcase' 0.64"
  std::optional<Role> recognised;  // kSyntactic or kCoreference when links on the text match it
  std::vector<TextLink> matching;  // the links that match it, best first
  std::string recognised_text;     // "on this text: 'it' → 'trophy' 0.58 (a pronoun to an earlier word)"
};

// ---- overview (src/analysis/stream.cc): what a run keeps of a head's whole map at any length ----

// One head's [T, T] attention as a screen can show it, plus its exact marginals. Block (i, j) of
// the pooled map covers the query rows and key columns t with t · cells / T == i (resp. j).
struct HeadOverview {
  int T = 0, cells = 0;             // cells = min(T, the requested resolution)
  std::vector<float> sum, max;      // [cells, cells] summed and largest weight of each block
  std::vector<double> received;     // [T] attention each key receives, Σ_q a_qk
  std::vector<double> offset_mass;  // [2T − 1] mean a_{q, q+d} over the queries that see q + d,
                                    //          index d + T − 1; NaN where no query does
  int cell_of(int t) const { return static_cast<int>(int64_t(t) * cells / T); }
};

// ---- words (src/analysis/words.cc): pieces merged into words, specials as units of their own ----

struct WordMap {
  int n_units = 0;
  std::vector<int32_t> unit_of_token;  // [T] unit index of each token; -1: token dropped
  std::vector<int32_t> word_of_unit;   // [U] word index of each unit; -1 for a special token
  std::vector<int32_t> unit_of_word;   // [W] unit of each word; -1: no token fell in the word
  std::vector<int32_t> first_token;    // [U] first token of each unit (for labels)
};

// ---- the atlas (src/analysis/atlas.h): one model over a corpus, gold data and the probe ----

struct AtlasOptions {
  std::string report_treebank;  // CoNLL-U; required
  std::string select_treebank;  // CoNLL-U; empty: select on the report treebank (in-sample)
  std::string report_coref;     // GAP TSV; empty: no coreference stage
  std::string select_coref;     // GAP TSV; empty: select on the report file (in-sample)
  std::string corpus;           // text file, one text a line; empty: report treebank sentences
  int probe_length = 50;        // tokens per copy
  int probe_count = 4;          // probes averaged
  uint32_t seed = 1234;
  int64_t min_support = 100;       // relations with fewer dependents (in either set) are not reported
  int64_t role_min_support = 100;  // relations a head's syntactic role may be based on
  int64_t max_sentences = 0;       // sentences read from each treebank (the first ones); 0: all
  int64_t max_gap_rows = 0;        // rows read from each GAP file (the first ones); 0: all
  // Also each corpus text's own roles: that text's statistics with the atlas's evidence, which are
  // the roles `headscope run` gives the text when this evidence is its corpus evidence.
  bool text_roles = false;
  // Evidence measured before, one per head (the cached corpus evidence, headscope/pipeline.h):
  // when given, every head's roles take their probe, syntax and coreference evidence from it (the
  // probe and the GAP files are then not run; the treebanks are still scored for the report).
  std::vector<HeadEvidence> evidence;
  // Zero-ablation importance of every head and its proxy (docs/causal.md), measured by the
  // pipeline's make_atlas over the first `importance_texts` sentences of the report treebank that
  // fit the model. 0: none; −1: kDefaultImportanceTexts when the model has at most
  // limits::kMaxAtlasImportanceHeadsByDefault heads, else none.
  int64_t importance_texts = -1;
  static constexpr int64_t kDefaultImportanceTexts = 50;
  // Called with the stage name, items done and items in the stage, after every item.
  std::function<void(std::string_view stage, int64_t done, int64_t total)> progress;
  // The treebank and GAP stages measured elsewhere, in shards merged (the bytes of the pipeline's
  // atlas_partial_to_bytes, src/pipeline/atlas.h); empty: run them here.
  std::string partial_bytes;
};

// ---- a corpus's statistics in mergeable parts (src/analysis/corpus_stats.cc, docs/corpus.md) ----

// Every head's statistics over a corpus, built shard by shard: each shard's texts are added to a
// CorpusStats of its own (the partial result), partials are serialised (a few bytes per head and
// statistic; no attention map) and merged. Sums are exact — each text's sum enters as a 128-bit
// fixed-point number (steps of 2⁻⁶⁴), so adding them is associative — and every count is an
// integer, so any split of a corpus, merged in any order, gives bit for bit the result of one
// pass over the same per-text values (a packed pass computes a text's values independently of its
// companions; Model::run_batch). Per head it keeps:
//   - the pooled statistics: the sums over every query row of every text (HeadStatsAccumulator's),
//     so means are over rows, as one long text's would be;
//   - how many texts gave it each primary role;
//   - histograms over texts of its normalised entropy and its max attention (the text's means),
//     kHistogramBins equal bins over [0, 1].
class CorpusStats {
 public:
  static constexpr int kHistogramBins = 20;
  CorpusStats() = default;
  // n_kv_head: key/value heads per layer (GQA; 0 = n_head), for each head's kv_head.
  CorpusStats(std::string model, int n_layer, int n_head, int n_kv_head = 0);

  // One text: its per-head sums, statistics (for the histograms) and roles at one level, and its
  // tokens. Throws Error when the sizes are not n_layer · n_head.
  void add(std::span<const StatSums> sums, std::span<const HeadStats> stats, std::span<const HeadRoles> roles,
           int64_t tokens);
  // Adds another partial of the same model (Error otherwise).
  void merge(const CorpusStats& other);

  // The partial as bytes (CBOR of the document "headscope.corpus_partial/1") and back; from_bytes
  // throws Error naming what is wrong with bytes that are not such a partial.
  std::string to_bytes() const;
  static CorpusStats from_bytes(std::string_view bytes);

  const std::string& model() const { return model_; }
  int n_layer() const { return n_layer_; }
  int n_head() const { return n_head_; }
  int n_kv_head() const { return n_kv_head_; }
  int64_t texts() const { return texts_; }
  int64_t tokens() const { return tokens_; }
  // Head i (layer · n_head + head): its pooled statistics, texts per primary role [kRoleCount]
  // (Role's order), and the two histograms [kHistogramBins].
  HeadStats stats(size_t head) const;
  std::span<const int64_t> role_counts(size_t head) const;
  std::span<const int64_t> entropy_histogram(size_t head) const;
  std::span<const int64_t> max_attention_histogram(size_t head) const;

  // Bit-for-bit equality of everything kept (the test of "any split, one result").
  bool operator==(const CorpusStats& other) const = default;

 private:
  struct Head {
    std::vector<std::pair<int64_t, uint64_t>> sums;  // fixed point: high and low 64 bits of a two's-complement __int128
    std::vector<int64_t> counts;
    std::vector<int64_t> roles, entropy, max_attention;
    bool operator==(const Head&) const = default;
  };
  void check_shape(size_t n, const char* what) const;
  std::string model_;
  int n_layer_ = 0, n_head_ = 0, n_kv_head_ = 0;
  int64_t texts_ = 0, tokens_ = 0;
  std::vector<Head> heads_;
};

}  // namespace headscope::analysis
