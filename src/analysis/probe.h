// headscope analysis — the repeated-random-tokens probe for induction and duplicate-token heads
// (Olsson et al. 2022, "In-context Learning and Induction Heads", section on the "repeated random
// tokens" measurement; Elhage et al. 2021).
//
// The probe is a sequence of L random vocabulary tokens repeated twice, wrapped in the model's
// usual special tokens: [prefix specials] t_1..t_L t_1..t_L [suffix specials]. For a token t_i of
// the second copy (position p2 = P + L + i, P = number of prefix specials):
//   induction score = attention from p2 to P + i + 1 (the token that followed t_i the first time);
//   duplicate score = attention from p2 to P + i     (the first occurrence of t_i itself);
// each averaged over i = 0..L-1 and over the probes. Both keys lie before the query, so the probe
// works for causal and bidirectional models alike.
#pragma once
#include <cstdint>
#include <functional>
#include <vector>

#include "analysis/roles.h"
#include "headscope/model.h"
#include "headscope/tensor.h"
#include "headscope/tokenizer.h"

namespace headscope::analysis {

struct ProbeLayout {
  Encoding encoding;   // the tokens to run
  int prefix = 0;      // P: special tokens before the first copy
  int length = 0;      // L: tokens in one copy
};

// Random ids drawn uniformly (std::mt19937 with `seed`) from the vocabulary, skipping special
// and placeholder entries ("[unused3]", "<s>", "<|endoftext|>") and repeats within a copy. The
// special tokens around the copies are those the tokenizer adds to a one-word text. Throws Error
// when the vocabulary has fewer than `length` usable entries.
ProbeLayout make_repeated_probe(const Tokenizer& tokenizer, int length, uint32_t seed);

// attention: [n_layer, n_head, T, T] of a run over layout.encoding → one ProbeEvidence per head
// (layer * n_head + head).
std::vector<ProbeEvidence> score_probe(const Tensor& attention, const ProbeLayout& layout);
// The same scores from a forward pass whose attention is streamed (CaptureOptions::attention_sink):
// only the second copy's rows are read as they go by, so a probe of any length stores no map.
std::vector<ProbeEvidence> run_probe(const Model& model, const ProbeLayout& layout);

// Averages per-head probe scores over several probes (element-wise mean).
std::vector<ProbeEvidence> average_probes(const std::vector<std::vector<ProbeEvidence>>& runs);

// The whole measurement: `count` probes of `length` tokens (seeds seed, seed + 1, ...) run through
// `model` (attention only), scored and averaged. `progress` is called after each probe with the
// number done. Throws Error when a probe is longer than the model's position limit.
std::vector<ProbeEvidence> measure_probe(const Model& model, int length, int count, uint32_t seed,
                                         const std::function<void(int done)>& progress = {});

}  // namespace headscope::analysis
