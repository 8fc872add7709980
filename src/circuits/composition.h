// headscope — what the composition scores read of a model (src/circuits/composition.cc), shared
// with their slow twin (circuits/reference/composition.h).
#pragma once
#include "headscope/circuits.h"
#include "headscope/model.h"

namespace headscope::circuits {

// One layer's attention with the norm gains folded in (include/headscope/circuits.h, "Composition
// scores"), every matrix with d_model columns: W_O is held transposed, so row h·d_head + i is
// column i of W_O^h, a direction the head writes.
struct FoldedLayer {
  Tensor w_q;    // [n_head·d_head, d_model]     diag(γ_q) W_Q diag(γ_in)
  Tensor w_k;    // [n_kv_head·d_head, d_model]  diag(γ_k) W_K diag(γ_in)
  Tensor w_v;    // [n_kv_head·d_head, d_model]  W_V diag(γ_in)
  Tensor w_o_t;  // [n_head·d_head, d_model]     (diag(γ_out) W_O)ᵀ
};

// Layer `layer` of `model` (Model::attention_weights and output_projection), shapes checked; without
// `fold_gains` the weights as stored.
FoldedLayer fold_layer(const Model& model, int layer, bool fold_gains = true);

// Head `head` of a folded layer as HeadMatrices (W_O^h [d_model, d_head] in column form again).
HeadMatrices head_matrices(const FoldedLayer& layer, const ModelConfig& config, int head);

}  // namespace headscope::circuits
