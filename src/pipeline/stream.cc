// headscope pipeline — run_streamed(); see stream.h.
#include "pipeline/stream.h"

#include <string>

#include "headscope/error.h"

namespace headscope {

Capture run_streamed(const Model& model, const Encoding& encoding, std::vector<analysis::HeadStream>& heads,
                     CaptureOptions capture, const std::function<void(int layer)>& layer_done) {
  const ModelConfig& c = model.config();
  const int64_t H = c.n_head, T = static_cast<int64_t>(encoding.size());
  if (static_cast<int64_t>(heads.size()) != int64_t(c.n_layer) * H)
    throw Error("attention stream: " + std::to_string(heads.size()) + " head streams for a model of " +
                std::to_string(int64_t(c.n_layer) * H) + " heads");
  capture.attention = false;
  if (capture.value_norms)
    capture.value_norm_sink = [&](int layer, const float* norms) {  // [H, T], before the layer's rows
      for (int64_t h = 0; h < H; ++h) heads[static_cast<size_t>(layer * H + h)].token.set_value_norms(norms + h * T);
    };
  // Each head's rows go to its stream as soon as the pass has computed them, in the stream's
  // parts (the costliest, the token-level statistics, first), on the threads of the attention.
  capture.attention_head_parts = analysis::HeadStream::kParts;
  capture.attention_head_sink = [&](int layer, int64_t h, int part, int64_t q0, int64_t q1, int64_t width,
                                    const float* probs) {
    heads[static_cast<size_t>(layer * H + h)].add_part(analysis::HeadStream::kParts - 1 - part, probs, int(q0), int(q1),
                                                       int(width));
  };
  capture.attention_sink = [&](int layer, int64_t, int64_t q1, int64_t, const float*) {
    if (q1 == T && layer_done) layer_done(layer);
  };
  Capture out = model.run(encoding, capture);
  for (analysis::HeadStream& head : heads) head.token.set_value_norms(nullptr);
  return out;
}

}  // namespace headscope
