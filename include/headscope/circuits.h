// headscope — circuits: prompt pairs for activation patching, the logit lens, composition scores.
//
// A patching experiment compares two prompts of the same length: a clean one, on which the model
// shows a behaviour, and a corrupted one that differs only where the behaviour's information is
// (Wang et al. 2022, "Interpretability in the Wild"; Conmy et al. 2023). Each prompt has an answer
// token (the one the behaviour predicts) and a wrong one (what the corruption predicts instead);
// the metric (logit difference, probability, loss) is read at the last position.
//
// The generators below write the standard tasks for a given model's tokenizer, seeded, so that a
// set can be written to JSON and run again:
//   - IOI, indirect object identification: "When Mary and John went to the store, John gave a drink
//     to" → " Mary"; corrupted by three unrelated names (the "ABC" distribution), balanced between
//     the ABBA and BABA orders;
//   - induction: a sequence of random tokens repeated; the answer is the token that followed the
//     current one in the first half; corrupted by a second half that does not repeat the first;
//   - greater-than (Hanna et al. 2023): "The war lasted from the year 1732 to the year 17"; models
//     that write digits one token each (Llama, Gemma) answer the tens digit, so the pair keeps the
//     first year's tens digit as the wrong answer and a year ending in 0x as the corruption.
// Names, places and objects are kept only when they are one token (after a space) for the model.
#pragma once
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "headscope/model.h"
#include "headscope/tensor.h"

namespace headscope {

struct PromptPair {
  std::string clean;       // the prompt on which the behaviour shows
  std::string corrupt;     // the same number of tokens, the behaviour's information replaced
  std::string answer;      // the token the clean prompt should continue with (its text, e.g. " Mary")
  std::string wrong;       // the competing token (" John": the subject, for IOI)
  std::string variant;     // a task's sub-kind ("ABBA" / "BABA" for IOI), or empty
  int32_t answer_id = -1;  // filled by check_pairs
  int32_t wrong_id = -1;
  int64_t n_tokens = 0;  // of each prompt, specials included (filled by check_pairs)
};

struct PromptPairs {
  std::string task;  // "ioi", "induction", "greater_than" or "custom"
  uint64_t seed = 0;
  std::string model;  // the model the pairs were checked against
  std::vector<PromptPair> pairs;
};

// The generators. Each draws `n` pairs with the seed (the same model and seed give the same pairs)
// and checks them with check_pairs. Throw Error when the model's vocabulary leaves too few
// one-token names (IOI needs 3) or the request is out of range (n in 1..100000).
PromptPairs make_ioi_pairs(const Model& model, int n, uint64_t seed);
// `length`: the random tokens of each half (2..256).
PromptPairs make_induction_pairs(const Model& model, int n, int length, uint64_t seed);
PromptPairs make_greater_than_pairs(const Model& model, int n, uint64_t seed);

// Tokenises both prompts and both answers with the model's tokenizer and fills the ids and token
// counts. Throws Error naming the pair and what to do when the prompts differ in length, or an
// answer is not exactly one token.
void check_pairs(const Model& model, PromptPairs& pairs);

// JSON: {"task", "seed", "model", "pairs": [{"clean", "corrupt", "answer", "wrong", "variant"}]}.
// read_prompt_pairs refuses unknown fields and missing ones with the field's name.
std::string prompt_pairs_to_json(const PromptPairs& pairs);
PromptPairs prompt_pairs_from_json(const std::string& json, const std::string& source);

// The logit lens (nostalgebraist 2020): the residual stream after every layer read through the
// model's final norm and unembedding, at one position. `capture` is a whole decoder run with
// hidden_states (hidden_states[l] the residual after layer l, hidden_states[n_layer] already
// normalised, as the decoders record them); `readout` is Model::final_readout(). Returns
// [n_layer + 1, vocab]: row 0 reads the embeddings, row n_layer is the model's own logits.
// Throws Error for a missing tensor or a position out of range.
Tensor logit_lens(const Capture& capture, const LogitReadout& readout, int position);

struct LensToken {
  int32_t id = -1;
  float logit = 0;
  float probability = 0;  // softmax over the whole row
  int64_t rank = 0;       // 0 for the largest logit; ties share the smaller rank
};
// The k tokens with the largest logits of one row of `vocab` logits, largest first.
std::vector<LensToken> lens_top(const float* logits, int64_t vocab, int k);
// One token's logit, probability and rank in a row. Throws Error for an id outside the vocabulary.
LensToken lens_token(const float* logits, int64_t vocab, int32_t id);

// ---- Activation patching (Wang et al. 2022; Heimersheim & Nanda 2024, "How to use and interpret
// activation patching") ----
//
// For each pair, the model runs the clean and the corrupted prompt once, keeping every activation.
// A patch copies one activation of the source run into the base run (Patch in headscope/model.h)
// and runs again from that activation's layer (Model::resume), so a sweep over 270 heads costs
// 270 partial passes. Directions:
//   denoise   base = corrupted prompt, source = clean: how much of the behaviour a site restores;
//   noise     base = clean prompt, source = corrupted: how much the behaviour needs that site.
// Metrics, read at the last position of the base prompt (decoders) with the pair's answer and
// wrong tokens:
//   logit_diff   logit[answer] − logit[wrong]
//   prob         softmax(logits)[answer]
//   loss         −log softmax(logits)[answer]
//   cosine       encoders: 1 − cos(mean-pooled last hidden state, the clean run's)
// Each result keeps the raw metric (the mean over pairs) and the normalised effect
//   (patched − corrupt) / (clean − corrupt),
// where clean and corrupt are the unpatched runs' metrics (means over pairs): 1 = the clean
// behaviour, 0 = the corrupted one, in either direction.
enum class PatchMetric { kLogitDiff, kProbability, kLoss, kCosine };
enum class PatchDirection { kDenoise, kNoise };
// What a sweep patches, one result per:
//   kHead          (layer, query head): o_h at every position
//   kHeadPosition  (layer, query head, position): o_h at one position
//   kQuery         (layer, query head): q_h at every position
//   kKey, kValue   (layer, key/value head): k_g or v_g at every position; under grouped-query
//                  attention the whole group of query heads reading it (PatchEffect::group)
//   kPattern       (layer, query head): the attention probabilities of every row
//   kResidual      (layer, position): the residual stream entering the layer
//   kAttention     (layer): the attention block's output, every position
//   kMlp           (layer): the feed-forward block's output, every position
enum class PatchSweep { kHead, kHeadPosition, kQuery, kKey, kValue, kPattern, kResidual, kAttention, kMlp };

const char* patch_metric_name(PatchMetric metric);           // "logit_diff", "prob", "loss", "cosine"
const char* patch_direction_name(PatchDirection direction);  // "denoise", "noise"
const char* patch_sweep_name(
    PatchSweep sweep);  // "head", "head_position", "q", "k", "v", "pattern", "resid", "attn", "mlp"
// The inverses; throw Error listing the names accepted.
PatchMetric patch_metric_from_name(const std::string& name);
PatchDirection patch_direction_from_name(const std::string& name);
PatchSweep patch_sweep_from_name(const std::string& name);

struct PatchRequest {
  std::vector<PatchSweep> sweeps = {PatchSweep::kHead};
  PatchDirection direction = PatchDirection::kDenoise;
  // Decoders: logit_diff by default; encoders: cosine, the only metric they have.
  PatchMetric metric = PatchMetric::kLogitDiff;
  std::vector<int> layers;  // only these layers (empty: every layer)
};

struct PatchEffect {
  PatchSweep sweep = PatchSweep::kHead;
  int layer = 0;
  int head = -1;           // query head, or key/value head for kKey / kValue; -1 when the sweep has none
  int64_t position = -1;   // kHeadPosition, kResidual; -1 otherwise
  std::vector<int> group;  // kKey / kValue: the query heads that read the key/value head
  double value = 0;        // the metric of the patched run, mean over pairs
  double normalised = 0;   // (value − corrupt) / (clean − corrupt); NaN when clean == corrupt
};

struct PatchReport {
  PatchMetric metric = PatchMetric::kLogitDiff;
  PatchDirection direction = PatchDirection::kDenoise;
  int n_pairs = 0;
  int64_t n_tokens = 0;           // of the first pair's prompts
  double clean = 0, corrupt = 0;  // unpatched metrics, means over pairs
  std::vector<PatchEffect> effects;
  int64_t passes = 0;  // resumed passes run (every effect, every pair)
};

// Runs every sweep of `request` over every pair (checked with check_pairs first: same token
// counts, one-token answers). Throws Error for a metric the model cannot give (cosine on a decoder,
// a logit metric on an encoder), a layer out of range, or an empty set of pairs.
PatchReport patch_sweep(const Model& model, PromptPairs& pairs, const PatchRequest& request);

// A sweep's numbers per pair, before the mean over pairs: what a shard of a dataset of pairs returns.
// Pairs are independent (each runs alone), so the parts of shards appended in dataset order are the
// whole dataset's parts, and patch_report of them is patch_sweep over the whole dataset, bit for bit.
struct PatchParts {
  PatchMetric metric = PatchMetric::kLogitDiff;
  PatchDirection direction = PatchDirection::kDenoise;
  int64_t n_tokens = 0;                // of the first pair's prompts
  std::vector<PatchEffect> sites;      // the sites patched (value and normalised unset)
  std::vector<double> clean, corrupt;  // [pairs] unpatched metrics
  std::vector<double> values;          // [pairs, sites] patched metrics
  int64_t passes = 0;
  size_t pairs() const { return clean.size(); }
  // Appends `more`: Error unless it patched the same sites with the same metric and direction.
  void append(const PatchParts& more);
};
PatchParts patch_sweep_parts(const Model& model, PromptPairs& pairs, const PatchRequest& request);
// The means over the pairs of `parts` (summed in pair order) and the normalised effects. Error for
// parts with no pair or inconsistent sizes.
PatchReport patch_report(const PatchParts& parts);

// The outputs of a set of heads patched together (every position), e.g. the top heads of a sweep:
// how much of the behaviour they carry between them. Throws Error for a head the model lacks.
struct HeadSetEffect {
  std::vector<HeadRef> heads;
  int n_pairs = 0;
  double clean = 0, corrupt = 0, value = 0, normalised = 0;  // as PatchReport / PatchEffect
};
HeadSetEffect patch_heads_together(const Model& model, PromptPairs& pairs, const std::vector<HeadRef>& heads,
                                   PatchDirection direction, PatchMetric metric);

// What a sweep or a path patch will run, known before it runs (a server refuses work over a
// budget with it): the resumed passes over every pair, and those passes times each pair's prompt
// tokens (a pass costs about T tokens' worth of layers, so per-position sweeps cost T² per site
// family). Checked pairs (check_pairs) give the token counts. Throws Error for what the run itself
// would refuse: a metric the model cannot give, a layer or head out of range, receivers not after
// every sender.
struct PatchCost {
  int64_t passes = 0;
  int64_t token_passes = 0;
};
PatchCost patch_sweep_cost(const Model& model, const PromptPairs& pairs, const PatchRequest& request);

// Path patching (Wang et al. 2022, section 3.1): the effect of sender heads on receiver heads
// through one input of the receivers only, everything else frozen.
//   run 2: the base prompt with the senders' o_h from the source run and every other head's o_h
//          and every feed-forward output frozen at the base run's own values, so that the senders'
//          change reaches later layers only along the residual stream, directly;
//   input logits: the metric of run 2 (the senders' direct effect on the logits);
//   input q / k / v: run 3 is the base prompt with only the receivers' q (or the k, v of their
//          key/value heads) set to what they were in run 2; its metric.
// With no receivers named, every head in a layer after the last sender is a receiver in turn
// (one result each). Throws Error for a head the model lacks, a receiver not after every sender.
struct PathPatchRequest {
  std::vector<HeadRef> senders;
  std::vector<HeadRef> receivers;  // together, or empty: each later head alone
  enum class Input { kQuery, kKey, kValue, kLogits };
  Input input = Input::kQuery;
  PatchDirection direction = PatchDirection::kNoise;
  PatchMetric metric = PatchMetric::kLogitDiff;
};
const char* path_input_name(PathPatchRequest::Input input);  // "q", "k", "v", "logits"
PathPatchRequest::Input path_input_from_name(const std::string& name);

struct PathEffect {
  std::vector<HeadRef> receivers;  // empty for the logits
  double value = 0, normalised = 0;
};
struct PathPatchReport {
  PathPatchRequest request;
  int n_pairs = 0;
  double clean = 0, corrupt = 0;
  std::vector<PathEffect> effects;
};
PathPatchReport path_patch(const Model& model, PromptPairs& pairs, const PathPatchRequest& request);
// Per pair: the frozen run 2, plus one run 3 per receiver group (none for the logits).
PatchCost path_patch_cost(const Model& model, const PromptPairs& pairs, const PathPatchRequest& request);

// ---- Gradients: attribution patching and token saliency (docs/gradients.md) ----
//
// The seed of Model::gradients for a patching metric read at the last position: logit_diff, prob
// and loss of answer_id (against wrong_id) for decoders; cosine for encoders, 1 − cos(mean-pooled
// last hidden state, `reference`) — with no reference, the run's own embedding (whose gradient is 0).
GradientSeed metric_seed(const Model& model, PatchMetric metric, int32_t answer_id, int32_t wrong_id,
                         std::vector<double> reference = {});
// The ids a decoder's metric reads after `text`: the answer and the wrong token (the answer again
// when the metric needs no wrong one), each checked to be one token. Throws Error naming what is
// missing (an answer; a wrong token for logit_diff) or what check_pairs refuses.
std::pair<int32_t, int32_t> metric_token_ids(const Model& model, const std::string& text, PatchMetric metric,
                                             const std::string& answer, const std::string& wrong);
// An encoder's cosine reference: the mean-pooled last hidden state of a run of `reference`.
std::vector<double> reference_embedding(const Model& model, const std::string& reference);

// Attribution patching (Nanda 2023; Syed et al. 2023, "Attribution Patching Outperforms Automated
// Circuit Discovery"): the first-order estimate of every patch of a sweep from one forward pass of
// each prompt and one backward pass of the base prompt,
//   metric(base with a ← a_source) ≈ metric(base) + (a_source − a_base) · ∂metric/∂a |base,
// for every site of PatchSweep (heads, head × position, q, k, v, patterns, residual positions,
// blocks), and with `edges` for every edge sender head → receiver head's query, key or value input
// (and → the logits): (c_sender,source − c_sender,base) · ∂metric/∂(the receiver's input through
// that path alone) (Gradients::receivers), c the head's write into the residual stream (through
// the sandwich norm's Jacobian at the base run on Gemma 2/3 and OLMo 2). Under grouped-query
// attention a K or V edge ends at the receiver's key/value head. Edges need a decoder: a post-norm
// encoder has no residual stream that every layer adds to.
struct AttributionRequest {
  std::vector<PatchSweep> sweeps = {PatchSweep::kHead};
  bool edges = false;
  PatchDirection direction = PatchDirection::kDenoise;
  PatchMetric metric = PatchMetric::kLogitDiff;
  std::vector<int> layers;  // sites in these layers only (empty: every layer); edges span every layer
};
struct EdgeEffect {
  HeadRef sender;
  HeadRef receiver;  // a query head for q; a key/value head for k and v; {n_layer, −1} for the logits
  PathPatchRequest::Input input = PathPatchRequest::Input::kLogits;
  double value = 0;       // the estimated change of the metric, mean over pairs
  double normalised = 0;  // value / (clean − corrupt)
};
struct AttributionReport {
  PatchReport sites;  // each effect's value: the estimated patched metric (base + change), mean over pairs
  std::vector<EdgeEffect> edges;
  int64_t forward_passes = 0, backward_passes = 0;
};
AttributionReport attribution_patch(const Model& model, PromptPairs& pairs, const AttributionRequest& request);

// Token saliency: how much each token's embedding moves a metric of the text.
//   gradient × input        e_t · ∂metric/∂e_t
//   integrated gradients    (e_t − e'_t) · Σ_i w_i ∂metric/∂e |e' + α_i (e − e')   (Sundararajan et al. 2017)
// e: the token embeddings the first layer reads (Gradients::token_embeddings); e': the baseline,
// zeros or one token's embedding at every position, special tokens (BOS, [CLS], [SEP]) kept as
// they are unless asked. The integration rules and their (α_i, w_i) are Captum's. Completeness:
// integrated gradients sum to metric(e) − metric(e') up to the rule's error, which is reported.
enum class SaliencyMethod { kGradientTimesInput, kIntegratedGradients };
enum class IntegrationRule { kGaussLegendre, kRiemannLeft, kRiemannRight, kRiemannMiddle, kRiemannTrapezoid };
const char* saliency_method_name(SaliencyMethod m);    // "grad_x_input", "integrated_gradients"
const char* integration_rule_name(IntegrationRule r);  // Captum's: "gausslegendre", "riemann_left", ...
SaliencyMethod saliency_method_from_name(const std::string& name);
IntegrationRule integration_rule_from_name(const std::string& name);
// The rule's α_i in [0, 1] and weights w_i (summing to 1) for `steps` points, as Captum builds them.
void integration_points(IntegrationRule rule, int steps, std::vector<double>& alphas, std::vector<double>& weights);

struct SaliencyRequest {
  SaliencyMethod method = SaliencyMethod::kIntegratedGradients;
  PatchMetric metric = PatchMetric::kLogitDiff;  // encoders: cosine
  std::string answer, wrong;                     // decoders: the tokens after the text (wrong: logit_diff only)
  std::string reference;                         // encoders: the text the cosine compares with
  int steps = 50;                                // integrated gradients: 1 .. 1000 (Riemann rules: ≥ 2)
  IntegrationRule rule = IntegrationRule::kGaussLegendre;
  int32_t baseline_token = -1;  // −1: zero embeddings; else this token's embedding at every position
  bool keep_special = true;     // special tokens keep their own embedding in the baseline
};
struct SaliencyReport {
  SaliencyRequest request;
  Encoding encoding;
  int32_t answer_id = -1, wrong_id = -1;
  std::vector<double> scores;   // [T] Σ over the embedding's dimensions of each token's attribution
  Tensor attributions;          // [T, d_model]
  double metric = 0;            // at the text
  double baseline_metric = 0;   // at the baseline (integrated gradients)
  double total = 0;             // Σ scores
  double completeness_gap = 0;  // |total − (metric − baseline_metric)| (integrated gradients)
  int64_t backward_passes = 0;
};
SaliencyReport saliency(const Model& model, const std::string& text, const SaliencyRequest& request);

// ---- Composition scores (Elhage et al. 2021, "A Mathematical Framework for Transformer Circuits") ----
//
// How much a later head reads what an earlier head writes, from the weights alone. The residual
// stream is a column vector x ∈ R^d_model. Head h of a layer reads with W_Q^h, W_K^h, W_V^h
// [d_head, d_model] (rows h·d_head .. of W_Q; under GQA the key and value rows of its group
// g(h) = h / (n_head / n_kv_head), the grouping the decoders use) and writes with
// W_O^h = W_O[:, h·d_head : (h + 1)·d_head] [d_model, d_head] (Model::output_projection):
//   W_QK^h = W_Q^hᵀ W_K^h  [d_model, d_model]   the score of query x_q for key x_k is x_qᵀ W_QK^h x_k:
//                                                its rows read the query's stream, its columns the key's
//   W_OV^h = W_O^h W_V^h   [d_model, d_model]   the head writes W_OV^h x_k: its columns read the key's
//                                                stream, its rows are what it writes into the stream
// For a sender s in layer l1 and a receiver r in layer l2 > l1 (Frobenius norms):
//   Q = ‖W_QK^rᵀ W_OV^s‖ / (‖W_QK^r‖ ‖W_OV^s‖)   what s writes, read as r's query
//   K = ‖W_QK^r  W_OV^s‖ / (‖W_QK^r‖ ‖W_OV^s‖)   ... as r's key
//   V = ‖W_OV^r  W_OV^s‖ / (‖W_OV^r‖ ‖W_OV^s‖)   ... as r's value
// These are TransformerLens's all_composition_scores (which multiplies OV · QK, OV · QKᵀ and OV · OV
// in its row-vector convention: the same numbers). Each score is in [0, 1]; a head whose norm is 0
// scores 0.
// What the matrices hold: the norm gains of AttentionWeights folded in and the norms' scalar
// division dropped (as Elhage et al. do): W_Q^h ← diag(γ_q) W_Q^h diag(γ_in), the same for W_K with
// γ_k and for W_V (γ_in only), and W_O ← diag(γ_out) W_O (CompositionOptions::fold_gains; off, the
// stored weights). RoPE is not included: W_QK is the
// bilinear form at relative position 0 (each relative offset rotates it). Biases, the score scale
// and soft-capping are left out too (the scores do not depend on a scale).
//
// The scores are computed from d_head-sized factors, never from a d_model × d_model matrix:
// with a factor F of a Gram matrix (F Fᵀ = W_V^s W_V^sᵀ, d_head × d_head),
//   ‖Aᵀ M B‖² = tr(Mᵀ (A Aᵀ) M (B Bᵀ)),  e.g. K² = ‖W_Q^rᵀ (W_K^r W_O^s) W_V^s‖² = ⟨G_Q^r, P Pᵀ⟩,
//   P = W_K^r W_O^s F_V^s [d_head, d_head],
// so a model costs one [(n_head + 2·n_kv_head)·d_head, d_model] × [d_model, n_head·d_head] GEMM per
// pair of layers (docs/circuits.md, "Composition scores").

// The three kinds, in the order of CompositionScores' tensors.
enum class CompositionKind { kQ, kK, kV };
inline constexpr CompositionKind kCompositionKinds[] = {CompositionKind::kQ, CompositionKind::kK, CompositionKind::kV};
const char* composition_kind_name(CompositionKind kind);  // "Q", "K", "V"

// A score's random baseline: the same score of Gaussian matrices (i.i.d. N(0, 1)) of one head's
// shapes, over `draws` draws: mean and standard deviation (n − 1).
struct CompositionBaseline {
  double mean = 0, std = 0;
};

struct CompositionOptions {
  int baseline_draws = 100;  // 2 .. 100000
  uint64_t seed = 0;         // of the baseline's draws (draw i has its own stream: any thread count, same numbers)
  bool fold_gains = true;    // false: the weights as stored, every norm gain left out
};

struct CompositionScores {
  ModelConfig model;
  // [n_layer, n_head, n_layer, n_head]: element [l1, h1, l2, h2] is the score of sender (l1, h1)
  // into receiver (l2, h2); 0 wherever l2 ≤ l1 (no path from a head to one in its own or an earlier layer).
  Tensor q, k, v;
  CompositionBaseline q_random, k_random, v_random;
  CompositionOptions options;
  double seconds = 0;           // wall time of the scores
  double baseline_seconds = 0;  // and of the baseline
  double cpu_seconds = 0;       // the process's CPU time over both (all threads)
  const Tensor& scores(CompositionKind kind) const;
  const CompositionBaseline& baseline(CompositionKind kind) const;
};

// Every score of `model` and the baselines for its d_model and d_head. Throws Error for a model
// with fewer than two layers or without attention_weights(), and for options out of range.
CompositionScores composition_scores(const Model& model, const CompositionOptions& options = {});

// One head's matrices as the scores read them (gains folded): w_q, w_k, w_v [d_head, d_model],
// w_o [d_model, d_head]. A sender needs only w_v and w_o.
struct HeadMatrices {
  Tensor w_q, w_k, w_v, w_o;
};
struct CompositionTriple {
  double q = 0, k = 0, v = 0;
};
// The three scores of one sender and one receiver, computed as composition_scores computes them.
// Throws Error naming the matrix whose shape does not fit.
CompositionTriple composition_of(const HeadMatrices& sender, const HeadMatrices& receiver);
// The baselines of Q, K and V for heads of these shapes (composition_scores calls it).
std::vector<CompositionBaseline> composition_baselines(int d_model, int d_head, int draws, uint64_t seed);

struct CompositionPair {
  HeadRef sender, receiver;
  double score = 0;
};
// The n pairs (l1 < l2) with the highest score of `kind`, highest first; ties in (sender, receiver)
// order. Throws Error for n < 1.
std::vector<CompositionPair> top_composition_pairs(const CompositionScores& scores, CompositionKind kind, int n);

}  // namespace headscope
