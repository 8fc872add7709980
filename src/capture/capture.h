// headscope — what a forward pass records, written in the data path by the model code.
// Every family calls these helpers at the same point of its layer, so the captured tensors mean
// the same thing for BERT, Llama and GPT-2 (shapes in include/headscope/model.h).
#pragma once
#include <vector>

#include "headscope/model.h"
#include "ops/packed_linear.h"

namespace headscope::capture {

// The bytes of the capture tensors `options` asks for, T query rows over Tk keys (T = Tk for a
// whole run; Model::extend records attention over every key so far):
//   attention L·H·T·Tk, head outputs L·H·T·d_head, contributions L·H·T·d_model, attention
//   output L·T·d_model (with either of the two before), hidden states (L+1)·T·d_model,
//   queries and keys (L·H + L·n_kv_head)·T·d_head — all fp32.
uint64_t capture_bytes(const ModelConfig& config, int64_t T, int64_t Tk, const CaptureOptions& options);

// Allocates the tensors `options` asks for, for a sequence of T tokens.
Capture allocate(const ModelConfig& config, int T, const CaptureOptions& options, std::vector<int> kv_head_of);

// Where layer `layer`'s attention probabilities [n_head, T, T] go: the capture buffer when
// attention is recorded, else `scratch` (resized as needed).
float* attention_buffer(Capture& capture, int layer, std::vector<float>& scratch);

// The output projection of one layer and what it records:
//   concat   [T, n_head · d_head]   the head outputs side by side (input of W_O)
//   W_O      [d_model, n_head · d_head] (nn.Linear layout), b_O [d_model] (may be null)
//   attn_out [T, d_model]           written: concat · W_Oᵀ + b_O
// Records head_outputs [h, T, d_head], contributions [h, T, d_model] = concat_h · W_O[:, h]ᵀ
// and attn_output, as requested in the capture.
// `packed`, when given, is W_O (with b_O) prepacked for the model's own GEMM; the per-head
// contributions always read W_O itself.
void project_heads(Capture& capture, int layer, const float* concat, const Tensor& W_O, const float* b_O,
                   float* attn_out, const ops::PackedLinear* packed = nullptr);

// Records the residual stream after layer `index − 1` (index 0 = embeddings): x [T, d_model].
void record_hidden(Capture& capture, int index, const float* x);

}  // namespace headscope::capture
