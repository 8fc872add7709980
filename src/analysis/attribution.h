// headscope analysis — what heads move, not only where they look: norm-weighted attention
// (Kobayashi et al. 2020), attention rollout (Abnar & Zuidema 2020) and direct logit attribution.
// Pure functions over captured tensors (shapes in headscope/model.h); the formulas are in
// docs/metrics.md ("Norm-weighted attention, rollout and logit attribution").
#pragma once
#include <cstdint>
#include <vector>

#include "headscope/analysis.h"
#include "headscope/model.h"

namespace headscope::analysis {

// ‖α_qk · f_h(x_k)‖ = α_qk · ‖f_h(x_k)‖ for every head: attention [n_layer, n_head, T, Tk] times
// value_norms [n_layer, n_head, Tk] broadcast over the rows. Returns [n_layer, n_head, T, Tk].
// Throws Error when the shapes disagree, ResourceError over limits::kMaxNormWeightedBytes.
// One head's block: out[q, k] = attention[q, k] · norms[k] for T rows of Tk keys (α_qk · ‖f_h(x_k)‖).
void norm_weight_rows(const float* attention, const float* norms, int64_t T, int64_t Tk, float* out);
Tensor norm_weighted_attention(const Tensor& attention, const Tensor& value_norms);

// Attention rollout: per layer Â_l = 0.5 · mean_h A_l,h + 0.5 · I with every row renormalised to sum
// to 1, and R_l = Â_l · R_{l−1} (R_0 = Â_0). attention [n_layer, n_head, T, T] → R [n_layer, T, T],
// row q of R_l: how much of layer l's output at q traces back to each input token. Square maps only
// (a whole run, not an extend() over a cache). ResourceError over limits::kMaxRolloutTokens.
Tensor attention_rollout(const Tensor& attention);

// Direct logit attribution of the logit of `target` at `position` (minus that of `contrast` when
// contrast >= 0) to every part of the final residual stream. `capture` holds contributions,
// attn_output, mlp_outputs and hidden_states of a whole decoder run (hidden_states[0] the
// embeddings, hidden_states[n_layer] after the final norm, as the decoder records them).
// The final norm is linearised at the run's own scale: divided by the rms (RMSNorm) or the
// standard deviation (LayerNorm, which also centres each part) of the full final residual. Under
// sandwich norms (readout.attention_gain: Gemma 2/3, OLMo 2) each attention part also goes through
// its layer's output norm at that block's own rms, so the parts still add up to the logit. The logit
// is the one before a final soft-cap (Gemma 2), which bends only the sum.
// Throws Error when a tensor is missing or an index is out of range.
LogitAttribution attribute_logit(const Capture& capture, const LogitReadout& readout, int position, int32_t target,
                                 int32_t contrast = -1);

// One head's direct effect on every logit at `position` (the per-head logit lens): its contribution
// through its layer's output norm (if any) and the final norm, both linearised as attribute_logit
// does, and the unembedding. [vocab] in the model's token order; entry target minus entry contrast
// equals attribute_logit(...).heads[layer · n_head + head]. Throws Error as attribute_logit does and
// for a head the run lacks.
std::vector<double> head_logits(const Capture& capture, const LogitReadout& readout, int layer, int head, int position);

}  // namespace headscope::analysis
