// headscope pipeline — a forward pass whose attention goes straight into the head streams of
// analysis/stream.h, block by block, so that no [T, T] map is ever stored.
#pragma once
#include <functional>
#include <vector>

#include "analysis/stream.h"
#include "headscope/model.h"
#include "headscope/tokenizer.h"

namespace headscope {

// Feeds one HeadStream per head of `model` ([n_layer · n_head], index layer · n_head + head) from a
// forward pass over `encoding` whose attention is streamed (CaptureOptions::attention_sink; with
// capture.value_norms, each layer's value norms reach the token-level statistics before its rows)
// in blocks of `capture.attention_block_rows` rows: no [T, T] map is stored. `capture` says what
// else the pass records; `layer_done(l)` is called once layer l's rows are all in. Returns the capture.
Capture run_streamed(const Model& model, const Encoding& encoding, std::vector<analysis::HeadStream>& heads,
                     CaptureOptions capture, const std::function<void(int layer)>& layer_done = nullptr);

}  // namespace headscope
