// headscope — what activation patching (patching.cc) and attribution patching
// (attribution_patching.cc) share: the metrics read off a run, a pair's two runs, the sites of a
// sweep and the checks of a request. Internal to src/circuits/.
#pragma once
#include <vector>

#include "headscope/circuits.h"

namespace headscope::circuits {

// Refuses a metric the model cannot give (cosine on a decoder, a logit metric on an encoder).
void check_metric(const Model& model, PatchMetric metric);
// Mean over positions of the last hidden state (the sentence embedding of mean-pooling encoders).
std::vector<double> mean_pooled(const Capture& cap);
// The metric of one run: the last row's logits (decoders) or 1 − cos of the mean-pooled last hidden
// state with `clean_embedding` (encoders).
double read_metric(PatchMetric metric, const Capture& cap, const PromptPair& pair,
                   const std::vector<double>& clean_embedding);

// A pair's two runs with everything a patch may read, and their metrics.
struct PairRuns {
  Encoding base_encoding;
  Capture base, source;  // base: the run patched into; source: where the values come from
  double clean = 0, corrupt = 0;
  std::vector<double> clean_embedding;  // encoders
};
CaptureOptions full_options(const Model& model);
PairRuns run_pair(const Model& model, const PromptPair& pair, PatchDirection direction, PatchMetric metric);

// The sites of one sweep over `layers`, each a patch with no source yet.
std::vector<PatchEffect> sites_of(PatchSweep sweep, const Model& model, const std::vector<int>& layers, int64_t T,
                                  const std::vector<int>& kv_head_of);
double normalised(double value, double clean, double corrupt);
void check_pair_set(const Model& model, PromptPairs& pairs, PatchMetric metric);
std::vector<int> sweep_layers(const ModelConfig& c, const PatchRequest& request);

}  // namespace headscope::circuits
