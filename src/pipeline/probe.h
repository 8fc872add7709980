// headscope pipeline — the repeated-random-tokens probe run through a model: its tokens drawn
// from the model's tokenizer, the forward pass streamed into the scorer of analysis/probe.h.
#pragma once
#include <cstdint>
#include <functional>
#include <vector>

#include "analysis/probe.h"
#include "headscope/model.h"
#include "headscope/tokenizer.h"

namespace headscope {

// Random ids drawn uniformly (std::mt19937 with `seed`) from the vocabulary, skipping special
// and placeholder entries ("[unused3]", "<s>", "<|endoftext|>") and repeats within a copy. The
// special tokens around the copies are those the tokenizer adds to a one-word text. Throws Error
// when the vocabulary has fewer than `length` usable entries.
analysis::ProbeLayout make_repeated_probe(const Tokenizer& tokenizer, int length, uint32_t seed);

// analysis::score_probe's scores from a forward pass whose attention is streamed
// (CaptureOptions::attention_sink) into an analysis::ProbeRowScorer: no map is stored.
std::vector<analysis::ProbeEvidence> run_probe(const Model& model, const analysis::ProbeLayout& layout);

// The whole measurement: `count` probes of `length` tokens (seeds seed, seed + 1, ...) run through
// `model` (attention only), scored and averaged. `progress` is called after each probe with the
// number done. Throws Error when a probe is longer than the model's position limit.
std::vector<analysis::ProbeEvidence> measure_probe(const Model& model, int length, int count, uint32_t seed,
                                                   const std::function<void(int done)>& progress = {});

}  // namespace headscope
