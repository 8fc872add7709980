// headscope — slow twin of the composition scores (circuits.h, "Composition scores"): the dense
// d_model × d_model matrices W_QK = W_Qᵀ W_K and W_OV = W_O W_V of every head formed in double
// and multiplied out, as the definitions read. d_model³ per pair: for the tests' tiny models.
#pragma once
#include "headscope/circuits.h"
#include "headscope/model.h"

namespace headscope::circuits::reference {

// The three scores of one sender and one receiver (shapes as composition_of; not checked).
CompositionTriple composition_of(const HeadMatrices& sender, const HeadMatrices& receiver);

// Every score of the model, [n_layer, n_head, n_layer, n_head] each as composition_scores lays them
// out (0 where the receiver's layer is not after the sender's), gains folded or not; no baseline.
CompositionScores composition_scores(const Model& model, bool fold_gains = true);

}  // namespace headscope::circuits::reference
