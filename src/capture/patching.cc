// headscope — activation patching inside the pass (Patch in headscope/model.h; docs/circuits.md).
// The Recorder replaces each patched activation at the point of the layer where the model
// computes it, so every family patches the same sites without a branch in its forward pass:
//   residual stream  patch_residual, as the layer starts
//   q, k, v          patch_qkv, after q/k-norm and RoPE, before attention reads them
//   pattern          patch_pattern, after the layer's attention (o_h recomputed from the pattern)
//   head output      project_heads, in W_O's input
//   attention block  project_heads, in W_O's output
//   feed-forward     record_mlp, in the block's output
#include <algorithm>
#include <string>

#include "capture/capture.h"
#include "headscope/error.h"
#include "ops/matmul.h"
#include "tensor/tensor_ops.h"

namespace headscope {

const char* patch_site_name(Patch::Site site) {
  switch (site) {
    case Patch::Site::kHeadOutput:
      return "head";
    case Patch::Site::kQuery:
      return "q";
    case Patch::Site::kKey:
      return "k";
    case Patch::Site::kValue:
      return "v";
    case Patch::Site::kPattern:
      return "pattern";
    case Patch::Site::kResidual:
      return "resid";
    case Patch::Site::kAttention:
      return "attn";
    case Patch::Site::kMlp:
      return "mlp";
  }
  return "?";
}

namespace capture {
namespace {

std::string describe(const Patch& p) {
  std::string s = std::string("patch ") + patch_site_name(p.site) + " of layer " + std::to_string(p.layer);
  if (p.head >= 0) s += ", head " + std::to_string(p.head);
  if (p.position >= 0) s += ", position " + std::to_string(p.position);
  return s;
}

// The source tensor a site reads and the shape it must have in a run of T tokens.
struct SourceOf {
  const Tensor* tensor;
  std::vector<int64_t> shape;
  const char* option;  // the CaptureOptions field that records it
};
SourceOf source_of(const Patch& p, const Capture& s, int64_t T) {
  const int64_t L = s.n_layer, H = s.n_head, Hkv = s.n_kv_head, Dh = s.d_head, D = s.d_model;
  switch (p.site) {
    case Patch::Site::kHeadOutput:
      return {&s.head_outputs, {L, H, T, Dh}, "head_outputs"};
    case Patch::Site::kQuery:
      return {&s.queries, {L, H, T, Dh}, "queries_keys"};
    case Patch::Site::kKey:
      return {&s.keys, {L, Hkv, T, Dh}, "queries_keys"};
    case Patch::Site::kValue:
      return {&s.values, {L, Hkv, T, Dh}, "values"};
    case Patch::Site::kPattern:
      return {&s.attention, {L, H, T, T}, "attention"};
    case Patch::Site::kResidual:
      return {&s.hidden_states, {L + 1, T, D}, "hidden_states"};
    case Patch::Site::kAttention:
      return {&s.attn_output, {L, T, D}, "head_outputs"};
    case Patch::Site::kMlp:
      return {&s.mlp_outputs, {L, T, D}, "mlp_outputs"};
  }
  throw Error("patch: unknown site");
}

bool per_head(Patch::Site s) {
  return s == Patch::Site::kHeadOutput || s == Patch::Site::kQuery || s == Patch::Site::kPattern;
}
bool per_kv_head(Patch::Site s) { return s == Patch::Site::kKey || s == Patch::Site::kValue; }

}  // namespace

void Recorder::check_patches(const std::vector<Patch>& patches, int64_t T, int64_t Tk) const {
  if (T != Tk) throw Error("patching needs a whole run (Model::run or resume), not an extend() after earlier tokens");
  if (sink_)
    throw Error(
        "patching needs the attention of every layer at once: it is not available on a streamed run "
        "(give a shorter text, or turn streaming off)");
  for (const Patch& p : patches) {
    if (p.layer < 0 || p.layer >= cap_.n_layer)
      throw Error(describe(p) + ": the model has layers 0.." + std::to_string(cap_.n_layer - 1));
    if (per_head(p.site) && (p.head < 0 || p.head >= cap_.n_head))
      throw Error(describe(p) + ": the layer has query heads 0.." + std::to_string(cap_.n_head - 1));
    if (per_kv_head(p.site) && (p.head < 0 || p.head >= cap_.n_kv_head))
      throw Error(describe(p) + ": the layer has key/value heads 0.." + std::to_string(cap_.n_kv_head - 1) +
                  (cap_.n_kv_head < cap_.n_head ? " (grouped-query attention: name the key/value head)" : ""));
    if (p.position < -1 || p.position >= T)
      throw Error(describe(p) + ": the text has positions 0.." + std::to_string(T - 1));
    if (p.source == nullptr) throw Error(describe(p) + ": no source run to copy from");
    const SourceOf src = source_of(p, *p.source, T);
    if (src.tensor->empty())
      throw Error(describe(p) + ": the source run did not record it (CaptureOptions::" + src.option + ")");
    if (src.tensor->shape != src.shape || p.source->n_layer != cap_.n_layer || p.source->n_head != cap_.n_head ||
        p.source->n_kv_head != cap_.n_kv_head || p.source->d_model != cap_.d_model || p.source->d_head != cap_.d_head)
      throw Error(describe(p) + ": the source run is not a run of this model over " + std::to_string(T) +
                  " tokens (patching needs two prompts with the same number of tokens)");
  }
}

void Recorder::patch_rows(const Patch& p, const float* src, float* dst, int64_t ld, int64_t width) const {
  if (p.position >= 0)
    std::copy_n(src + p.position * width, width, dst + p.position * ld);
  else
    copy_rows(dst, ld, src, width, cap_.T, width);
}

void Recorder::patch_residual(int layer, float* x) const {
  if (patches_.empty()) return;
  const int64_t T = cap_.T, D = cap_.d_model;
  for (const Patch* p : patches_[size_t(layer)])
    if (p->site == Patch::Site::kResidual) patch_rows(*p, p->source->hidden_states.ptr() + layer * T * D, x, D, D);
}

void Recorder::patch_qkv(int layer, float* q, int64_t q_stride, float* k, int64_t k_stride, float* v,
                         int64_t v_stride) {
  if (patches_.empty()) return;
  const int64_t T = cap_.T, H = cap_.n_head, Hkv = cap_.n_kv_head, Dh = cap_.d_head;
  for (const Patch* p : patches_[size_t(layer)]) {
    const int64_t h = p->head;
    switch (p->site) {
      case Patch::Site::kQuery:  // queries [L, H, T, Dh] -> q [T, H·Dh]
        patch_rows(*p, p->source->queries.ptr() + (layer * H + h) * T * Dh, q + h * Dh, q_stride, Dh);
        break;
      case Patch::Site::kKey:  // keys [L, Hkv, T, Dh] -> k [T, Hkv·Dh]
        patch_rows(*p, p->source->keys.ptr() + (layer * Hkv + h) * T * Dh, k + h * Dh, k_stride, Dh);
        break;
      case Patch::Site::kValue:
        patch_rows(*p, p->source->values.ptr() + (layer * Hkv + h) * T * Dh, v + h * Dh, v_stride, Dh);
        break;
      default:
        break;
    }
  }
}

void Recorder::patch_pattern(int layer, const float* v, int64_t v_stride, float* concat) {
  if (patches_.empty()) return;
  const int64_t T = cap_.T, H = cap_.n_head, Dh = cap_.d_head, C = H * Dh;
  for (const Patch* p : patches_[size_t(layer)]) {
    if (p->site != Patch::Site::kPattern) continue;
    const int64_t h = p->head, q0 = p->position >= 0 ? p->position : 0, q1 = p->position >= 0 ? q0 + 1 : T;
    const float* P = p->source->attention.ptr() + ((layer * H + h) * T + q0) * T;  // rows q0..q1−1 [rows, T]
    // o_h[q] = Σ_k P[q, k] · v_g(h)[k]   [rows, Dh], into head h's columns of concat
    const float* vg = v + int64_t(cap_.kv_head_of[size_t(h)]) * Dh;
    ops::matmul(P, T, vg, v_stride, concat + q0 * C + h * Dh, C, q1 - q0, Dh, T, /*trans_b=*/false);
    if (!cap_.attention.empty())  // the capture shows the pattern the head used
      std::copy_n(P, (q1 - q0) * T, cap_.attention.ptr() + ((layer * H + h) * T + q0) * T);
  }
}

void Recorder::patch_heads(int layer, float* concat) const {
  if (patches_.empty()) return;
  const int64_t T = cap_.T, H = cap_.n_head, Dh = cap_.d_head;
  for (const Patch* p : patches_[size_t(layer)])  // head_outputs [L, H, T, Dh] -> concat [T, H·Dh]
    if (p->site == Patch::Site::kHeadOutput)
      patch_rows(*p, p->source->head_outputs.ptr() + (layer * H + p->head) * T * Dh, concat + p->head * Dh, H * Dh, Dh);
}

void Recorder::patch_block(int layer, Patch::Site site, float* out) const {
  if (patches_.empty()) return;
  const int64_t T = cap_.T, D = cap_.d_model;
  for (const Patch* p : patches_[size_t(layer)]) {
    if (p->site != site) continue;
    const Tensor& src = site == Patch::Site::kAttention ? p->source->attn_output : p->source->mlp_outputs;
    patch_rows(*p, src.ptr() + layer * T * D, out, D, D);
  }
}

void Recorder::resumed_at(int first) {
  for (Tensor* t :
       {&cap_.queries, &cap_.keys, &cap_.values, &cap_.head_outputs, &cap_.attn_output, &cap_.mlp_outputs}) {
    if (t->empty()) continue;
    const int64_t per_layer = t->numel() / t->dim(0);
    std::fill_n(t->ptr(), first * per_layer, 0.0f);
  }
}

}  // namespace capture
}  // namespace headscope
