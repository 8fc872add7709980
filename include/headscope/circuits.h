// headscope — circuits: prompt pairs for activation patching.
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

// The outputs of a set of heads patched together (every position), e.g. the top heads of a sweep:
// how much of the behaviour they carry between them. Throws Error for a head the model lacks.
struct HeadSetEffect {
  std::vector<HeadRef> heads;
  int n_pairs = 0;
  double clean = 0, corrupt = 0, value = 0, normalised = 0;  // as PatchReport / PatchEffect
};
HeadSetEffect patch_heads_together(const Model& model, PromptPairs& pairs, const std::vector<HeadRef>& heads,
                                   PatchDirection direction, PatchMetric metric);

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

}  // namespace headscope
