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

}  // namespace headscope
