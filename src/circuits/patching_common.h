// headscope — what activation patching (patching.cc), attribution patching
// (attribution_patching.cc) and saliency (saliency.cc) share: the names of their options, the metrics read off a run, a
// pair's two runs, the sites of a sweep and the checks of a request. Internal to src/circuits/.
#pragma once
#include <array>
#include <string>
#include <utility>
#include <vector>

#include "headscope/circuits.h"
#include "headscope/error.h"

namespace headscope::circuits {

// An enum value by its name in `table`, or Error listing the names; and the name of a value.
template <class E, size_t N>
E from_name(const std::string& name, const std::array<std::pair<E, const char*>, N>& table, const char* what) {
  std::string names;
  for (const auto& [e, n] : table) {
    if (name == n) return e;
    names += std::string(names.empty() ? "" : ", ") + n;
  }
  throw Error("unknown " + std::string(what) + " \"" + name + "\" (one of: " + names + ")");
}
template <class E, size_t N>
const char* to_name(E e, const std::array<std::pair<E, const char*>, N>& table) {
  for (const auto& [x, n] : table)
    if (x == e) return n;
  return "?";
}

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
