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
//
// Pure scoring only: drawing the probe's tokens and running it through a model live in the
// pipeline (src/pipeline/probe.h).
#pragma once
#include <cstdint>
#include <vector>

#include "analysis/roles.h"
#include "headscope/tensor.h"
#include "headscope/tokenizer.h"

namespace headscope::analysis {

struct ProbeLayout {
  Encoding encoding;  // the tokens to run
  int prefix = 0;     // P: special tokens before the first copy
  int length = 0;     // L: tokens in one copy
};

// attention: [n_layer, n_head, T, T] of a run over layout.encoding → one ProbeEvidence per head
// (layer * n_head + head).
std::vector<ProbeEvidence> score_probe(const Tensor& attention, const ProbeLayout& layout);
// The same scores from attention that goes by in blocks of query rows, as a streamed forward
// pass hands them over (CaptureOptions::attention_sink): only the second copy's rows are read, so
// a probe of any length stores no map. Blocks of one layer arrive in order; layers in any order.
class ProbeRowScorer {
 public:
  ProbeRowScorer(const ProbeLayout& layout, int n_layer, int n_head);
  // probs: [n_head, q1 − q0, width], rows q0 .. q1 − 1 of every head of `layer`.
  void add_block(int layer, int64_t q0, int64_t q1, int64_t width, const float* probs);
  std::vector<ProbeEvidence> result() const;  // one per head (layer * n_head + head)

 private:
  int64_t H_, P_, L_;
  std::vector<double> induction_, duplicate_;
};

// Averages per-head probe scores over several probes (element-wise mean).
std::vector<ProbeEvidence> average_probes(const std::vector<std::vector<ProbeEvidence>>& runs);

}  // namespace headscope::analysis
