// headscope pipeline — norm-weighted attention, rollout and direct logit attribution for a
// frontend (see headscope/pipeline.h; the analysis itself is in analysis/attribution.h).
#include <string>

#include "analysis/attribution.h"
#include "analysis/words.h"
#include "headscope/error.h"
#include "headscope/pipeline.h"

namespace headscope {
namespace {

const Tensor& dense_maps(const RunAnalysis& run, const char* what) {
  if (run.capture.attention.empty())
    throw Error(std::string(what) + " needs the dense attention maps, and this run of " + std::to_string(run.T()) +
                    " tokens streamed them",
                Remedy::kDenseMaps);
  return run.capture.attention;
}

}  // namespace

Tensor norm_weighted_attention(const RunAnalysis& run) {
  const Tensor& maps = dense_maps(run, "norm-weighted attention");
  if (run.capture.value_norms.empty()) throw Error("norm-weighted attention: the run kept no value norms");
  return analysis::norm_weighted_attention(maps, run.capture.value_norms);
}

void norm_weighted_head(const RunAnalysis& run, int layer, int head, float* out) {
  const Tensor& maps = dense_maps(run, "norm-weighted attention");  // [L, H, T, T]
  const Tensor& norms = run.capture.value_norms;                    // [L, H, T]
  const int64_t H = maps.dim(1), T = maps.dim(2);
  if (norms.numel() != maps.dim(0) * H * T) throw Error("norm-weighted attention: the run kept no value norms");
  const int64_t lh = int64_t{layer} * H + head;
  analysis::norm_weight_rows(maps.ptr() + lh * T * T, norms.ptr() + lh * T, T, T, out);
}

Tensor attention_rollout(const RunAnalysis& run) {
  return analysis::attention_rollout(dense_maps(run, "attention rollout"));
}

Tensor merge_into_words(const RunAnalysis& run, const Tensor& token_maps) {
  return analysis::merge_attention(token_maps, run.words);
}

std::vector<analysis::LogitAttribution> attribute_logits(const Model& model, const Encoding& encoding,
                                                         const LogitAttributionOptions& options) {
  const ModelConfig& c = model.config();
  const LogitReadout readout = model.final_readout();  // throws for an encoder
  if (encoding.size() == 0) throw Error("logit attribution: the text produced no tokens");
  CaptureOptions capture = CaptureOptions::attention_only();
  capture.attention = false;  // no maps: the parts need each head's contribution only
  capture.contributions = capture.hidden_states = capture.mlp_outputs = true;
  const Capture cap = model.run(encoding, capture);
  const int T = cap.T;
  const int64_t D = c.d_model, vocab = readout.unembedding->dim(0);
  std::vector<analysis::LogitAttribution> out;
  for (int p = 0; p < T; ++p) {
    int32_t target;
    if (p + 1 < T) {
      target = encoding.tokens[size_t(p + 1)].id;  // the actual next token
    } else {  // the last position: what the model predicts, from its own final normalised stream
      const float* h = cap.hidden_states.ptr() + (int64_t(c.n_layer) * T + p) * D;
      double best = -1e300;
      target = 0;
      for (int64_t v = 0; v < vocab; ++v) {
        double logit = 0;
        for (int64_t i = 0; i < D; ++i) logit += double(h[i]) * readout.unembedding->ptr()[v * D + i];
        if (logit > best) best = logit, target = int32_t(v);
      }
    }
    out.push_back(analysis::attribute_logit(cap, readout, p, target));
    if (options.contrast >= 0) out.push_back(analysis::attribute_logit(cap, readout, p, target, options.contrast));
  }
  return out;
}

}  // namespace headscope
