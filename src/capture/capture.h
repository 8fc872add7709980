// headscope — what a forward pass records, written in the data path by the model code.
// Every family records through one capture::Recorder at the same points of its layer, so the
// captured tensors mean the same thing for BERT, Llama and GPT-2 (shapes in include/headscope/model.h).
#pragma once
#include <vector>

#include "headscope/model.h"
#include "ops/attention.h"
#include "ops/packed_linear.h"
#include "ops/softmax.h"
#include "tensor/quant_matrix.h"

namespace headscope::capture {

// The bytes of the capture tensors `options` asks for, T query rows over Tk keys (T = Tk for a
// whole run; Model::extend records attention over every key so far):
//   attention L·H·T·Tk, head outputs L·H·T·d_head, contributions L·H·T·d_model, attention
//   output L·T·d_model (with either of the two before), hidden states (L+1)·T·d_model,
//   queries and keys (L·H + L·n_kv_head)·T·d_head, logits T·vocab (decoders) — all fp32. allocate() allocates exactly
//   these.
uint64_t capture_bytes(const ModelConfig& config, int64_t T, int64_t Tk, const CaptureOptions& options);

// The working buffer of a pass's attention probabilities when they are not stored: one block of
// rows, [n_head, min(T, attention_block_rows), Tk]; 0 when they are stored (the capture holds them).
uint64_t attention_scratch_bytes(const ModelConfig& config, int64_t T, int64_t Tk, const CaptureOptions& options);

// Rows q0 .. q1 − 1 over keys k0 .. k1 − 1 of head `head` of layer `layer` from the queries and
// keys in `capture`: probs [q1 − q0, k1 − k0], computed with ops::attention as the pass did
// (`scale` and `mask` are the layer's) in the pass's default blocks of rows
// (CaptureOptions{}.attention_block_rows), so the rows equal those of a stored run with default
// blocks bit for bit. A streamed run makes a GQA group's scores in one GEMM (ops::attention): the
// same dot products, bit for bit with oneDNN's AVX-512 kernels, within float rounding with its
// AVX2 ones. Each block's whole rows are computed (the softmax needs every key), one block at a
// time; only the asked keys are kept. Model::attention_from_qk of each family calls this.
void attention_from_qk(const Capture& capture, int layer, int head, int64_t q0, int64_t q1, int64_t k0, int64_t k1,
                       float scale, const ops::KeyMask& mask, float* probs);

// Throws Error unless Model::resume may run: T > 0, 0 <= first_layer < n_layer, prefix
// [n_layer + 1, T, d_model], and options asking for no attention maps, contributions or value norms.
void check_resume(const ModelConfig& config, int64_t T, int first_layer, const Tensor& prefix,
                  const CaptureOptions& options);

// Allocates the tensors `options` asks for, T query rows over Tk keys (T = Tk for a whole run),
// without a zero fill: a run writes every element of them.
Capture allocate(const ModelConfig& config, int64_t T, int64_t Tk, const CaptureOptions& options,
                 std::vector<int> kv_head_of);

// The bookkeeping of one forward pass: made once per run, it owns the Capture and decides where
// each recorded tensor goes. Model code calls it at fixed points of every layer and never touches
// the capture tensors itself, so a new way of recording (for example handing attention to
// consumers block by block instead of storing [L, H, T, Tk]) changes this class only.
class Recorder {
 public:
  // A pass of T query rows over Tk keys (T = Tk for a whole run); kv_head_of [n_head] maps each
  // query head to the key/value head it reads.
  Recorder(const ModelConfig& config, int64_t T, int64_t Tk, const CaptureOptions& options,
           std::vector<int> kv_head_of);

  const std::vector<int>& kv_head_of() const { return cap_.kv_head_of; }
  // Whether this pass hands its attention to a sink (CaptureOptions::attention_sink).
  bool streams() const { return bool(sink_); }

  // A resumed pass (Model::resume) starts at `first`: the per-layer slots of the layers before it
  // (queries, keys, values, head outputs, attention output, feed-forward outputs) are set to 0.
  void resumed_at(int first);

  // Activation patching (CaptureOptions::patches), at the point of the layer where each site is
  // computed. The constructor checks every patch (layer, head, position, and that its source holds
  // the tensor it reads with this run's shape) and throws Error naming the patch otherwise.
  //   x [T, d_model], the residual stream entering `layer`: rows of kResidual patches replaced.
  void patch_residual(int layer, float* x) const;
  //   q [T, n_head·d_head], k, v [T, n_kv_head·d_head] (row strides given), after q/k-norm and
  //   RoPE, before attention reads them: kQuery, kKey, kValue patches.
  void patch_qkv(int layer, float* q, int64_t q_stride, float* k, int64_t k_stride, float* v, int64_t v_stride);
  //   After the layer's attention: kPattern patches put the source's probabilities in the rows
  //   they name and recompute those rows of o_h = pattern · v_g(h) in concat [T, n_head·d_head]
  //   from v [T, n_kv_head·d_head] (row stride v_stride), the values this run's attention read.
  void patch_pattern(int layer, const float* v, int64_t v_stride, float* concat);

  // Layer `layer`'s attention, computed by `attend(q0, q1, width, probs)` block by block: rows
  // q0 .. q1 − 1 of this pass (CaptureOptions::attention_block_rows at a time) over its first
  // `width` keys, into `probs` (ops::ProbsOut: [n_head, q1 − q0, width] at the given strides).
  // `causal`: a block needs only the keys up to its last row (width = past + q1), else every key.
  // Stored attention is written in place into the capture (the keys after `width` set to 0);
  // otherwise each block goes to a scratch buffer owned here and, when streamed
  // (CaptureOptions::attention_sink), to the sink. Stored and streamed runs compute the same
  // blocks; in a streamed block's buffer the heads of a GQA group share one score GEMM, which
  // gives the same numbers bit for bit on AVX-512 and within float rounding on AVX2
  // (ops/attention.h).
  template <class Attend>
  void attention(int layer, bool causal, Attend&& attend) {
    for (int64_t q0 = 0; q0 < cap_.T;) {
      const Block b = block(layer, q0, causal);
      attend(b.q0, b.q1, b.width, b.probs);
      hand_over(layer, b);
      q0 = b.q1;
    }
  }

  // Records the queries and keys of `layer` when asked:
  //   q [T, n_head · d_head]    row stride q_stride, head h in columns [h·d_head, (h+1)·d_head)
  //   k [T, n_kv_head · d_head] row stride k_stride (n_kv_head < n_head under GQA)
  // into queries [layer, h, T, d_head] and keys [layer, g, T, d_head].
  // and, when asked (CaptureOptions::values), v [T, n_kv_head · d_head] at row stride v_stride into
  // values [layer, g, T, d_head].
  void record_qkv(int layer, const float* q, int64_t q_stride, const float* k, int64_t k_stride, const float* v,
                  int64_t v_stride);

  // The output projection of one layer and what it records:
  //   concat   [T, n_head · d_head]   the head outputs side by side (input of W_O); the heads of
  //                                   CaptureOptions::ablation, then kHeadOutput patches, are
  //                                   replaced in it first, so what is recorded and projected is
  //                                   the ablated (patched) model's
  //   W_O      [d_model, n_head · d_head] (nn.Linear layout), b_O [d_model] (may be null)
  //   attn_out [T, d_model]           written: concat · W_Oᵀ + b_O, then the rows of kAttention
  //                                   patches replaced (the per-head contributions stay those of
  //                                   concat)
  // Records head_outputs [h, T, d_head], contributions [h, T, d_model] = concat_h · W_O[:, h]ᵀ
  // and attn_output, as requested.
  // A decoder's W_O is a QuantMatrix, fp32 or kept as the model file stores it: the product is
  // ops::quant_linear's, and a stored W_O has each head's columns dequantised for that head's
  // contribution (QuantMatrix::dequantize_cols). An encoder's W_O is fp32, prepacked with its bias
  // for the model's own GEMM (ops::PackedLinear); the contributions read its fp32 weights.
  void project_heads(int layer, float* concat, const QuantMatrix& W_O, const float* b_O, float* attn_out);
  void project_heads(int layer, float* concat, const ops::PackedLinear& W_O, float* attn_out);
  // project_heads in two halves, for a packed pass (Model::run_batch) whose W_O runs once over
  // the rows of every text: before_projection replaces the ablated and patched heads in this
  // text's concat [T, n_head · d_head] (W_O's shape [rows, cols] checked); the caller computes
  // attn_out = concat · W_Oᵀ + b_O; after_projection patches kAttention rows and records.
  void before_projection(int layer, float* concat, int64_t rows, int64_t cols);
  void after_projection(int layer, const float* concat, const QuantMatrix& W_O, float* attn_out);
  void after_projection(int layer, const float* concat, const ops::PackedLinear& W_O, float* attn_out);

  // Records, when asked, the norm of what each head moves from each key (Kobayashi et al. 2020):
  //   v   [Tk, n_kv_head · d_head] row stride v_stride, every key's values as attention reads them
  //       (after their bias); head h reads value head kv_head_of[h]
  //   W_O [d_model, n_head · d_head], as project_heads takes it
  // into value_norms [layer, h, k] = ‖v_{kv_head_of[h]},k · W_O[:, h·d_head:(h+1)·d_head]ᵀ‖, then hands
  // the layer's norms to CaptureOptions::value_norm_sink. Call it before the layer's attention.
  void record_value_norms(int layer, const float* v, int64_t v_stride, const QuantMatrix& W_O);
  void record_value_norms(int layer, const float* v, int64_t v_stride, const ops::PackedLinear& W_O);

  // The output of layer `layer`'s feed-forward block, out [T, d_model]: the rows of kMlp patches
  // replaced, then recorded when asked.
  void record_mlp(int layer, float* out);

  // Records the residual stream at slot `index` of hidden_states (0 = embeddings): x [T, d_model].
  void record_hidden(int index, const float* x);

  // Where the logits [T, vocab] go when they were asked for (CaptureOptions::logits), else null.
  float* logits() { return cap_.logits.empty() ? nullptr : cap_.logits.ptr(); }
  // Whether they are the last row's only ([1, vocab], CaptureOptions::last_logits).
  bool last_logits() const { return last_only_; }

  // Hands the capture over at the end of the pass.
  Capture finish() { return std::move(cap_); }

 private:
  struct Block {
    int64_t q0, q1, width;
    ops::ProbsOut probs;
  };
  Block block(int layer, int64_t q0, bool causal);
  void hand_over(int layer, const Block& block) const;
  // W_O [d_model, n_head · d_head] as the per-head records read it.
  struct OutputWeights {
    const float* fp32;          // its values (row stride n_head · d_head), or null when kept as stored
    const QuantMatrix* stored;  // read when fp32 is null
  };
  static OutputWeights output_weights(const QuantMatrix& W_O) {
    return {W_O.stored() ? nullptr : W_O.fp32().ptr(), &W_O};
  }
  // Columns h·Dh .. (h+1)·Dh of W_O as fp32 [d_model, Dh] at row stride `ld`: W_O's own values
  // when it is fp32 (ld = n_head · d_head), else that head's columns dequantised into `scratch`.
  struct HeadColumns {
    const float* data;
    int64_t ld;
  };
  HeadColumns head_columns(OutputWeights W_O, int64_t h, std::vector<float>& scratch) const;
  void check_output_weights(int layer, int64_t rows, int64_t cols) const;  // [d_model, n_head · d_head]
  void record_heads(int layer, const float* concat, const float* attn_out, OutputWeights W_O);
  void value_norms(int layer, const float* v, int64_t v_stride, OutputWeights W_O);

  Capture cap_;
  int64_t Tk_;
  CaptureOptions::AttentionSink sink_;           // set when attention is streamed
  CaptureOptions::AttentionHeadSink head_sink_;  // set when streamed attention is also consumed head by head
  ops::HeadFollowUp follow_;                     // the current block's head_sink_ calls (parts fixed at construction)
  const Ablation* ablation_;                     // heads replaced before W_O (null: none)
  std::vector<std::vector<const Patch*>> patches_;  // [n_layer]: the patches of each layer, in order
  void check_patches(const std::vector<Patch>& patches, int64_t T, int64_t Tk) const;
  // Rows of `dst` (row stride ld, `width` values from column `col`) from the source rows
  // src [T, width] (contiguous), every row or only `position`.
  void patch_rows(const Patch& p, const float* src, float* dst, int64_t ld, int64_t width) const;
  void patch_heads(int layer, float* concat) const;                 // kHeadOutput, in W_O's input
  void patch_block(int layer, Patch::Site site, float* out) const;  // kAttention / kMlp [T, d_model]
  CaptureOptions::ValueNormSink value_norm_sink_;  // set when value norms are recorded and wanted early
  int64_t block_rows_;
  bool last_only_ = false;  // CaptureOptions::last_logits
  Tensor scratch_;          // [n_head, T or block rows, Tk] probabilities when attention is not recorded
};

}  // namespace headscope::capture
