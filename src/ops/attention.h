// headscope — scaled dot-product attention over all heads of one layer (Vaswani et al. 2017, eq. 1):
//   P_h = softmax(scale · Q_h K_{g(h)}ᵀ + mask),   O_h = P_h V_{g(h)}
// with g(h) = kv_head_of[h] (grouped-query attention; identity for plain multi-head attention).
// P_h is written straight into the caller's buffer — the capture buffer when attention is
// being recorded — so capturing costs no extra pass (STYLE.md, "capture in the data path").
// With ProbsOut::group_scores, when the n = n_head / n_kv_head query heads of each group are
// consecutive and their P_h lie one after the other (probs.head_stride = T_q · ld), a group's
// scores are one GEMM over its n·T_q query rows, K_g packed once; with oneDNN's AVX-512 kernels
// the probabilities are bit for bit those of one GEMM per head, with its AVX2 ones within float
// rounding (ops_test). The streamed blocks ask for it; stored maps and tiles do not, so they
// stay equal to each other bit for bit on every path.
#pragma once
#include <cstdint>
#include <functional>

#include "ops/softmax.h"

namespace headscope::ops {

struct AttentionDims {
  int64_t T_q = 0;        // query rows in this call
  int64_t T_k = 0;        // keys (T_q plus any cached past)
  int64_t n_head = 0;     // query heads
  int64_t n_kv_head = 0;  // key/value heads
  int64_t d_head = 0;
  float scale = 0.0f;  // usually 1/√d_head
};

// Work on each head's probabilities once they are written: run(h, part) for every part in
// [0, parts), after head h's rows are complete, on whichever thread of the call is free. The
// heads' computations and these parts share one pool of threads, in an order that consumes each
// head soon after it is computed (while its rows are still in cache) and keeps every thread busy
// to the end. Parts of one head may run at once: they must touch disjoint state.
struct HeadFollowUp {
  int parts = 0;
  std::function<void(int64_t head, int part)> run;
};

// Where the probabilities go: row r of head h at data + h · head_stride + r · ld (ld >= T_k).
// Contiguous [n_head, T_q, T_k] is {data, T_q · T_k, T_k}; a block of rows of a longer stored map
// has the map's strides. `then` (may be null): what consumes each head's rows, see HeadFollowUp.
// group_scores: a GQA group's scores may be one GEMM (above).
struct ProbsOut {
  float* data;
  int64_t head_stride, ld;
  const HeadFollowUp* then = nullptr;
  bool group_scores = false;
};

// q:     [T_q, n_head · d_head]     row stride ldq; head h in columns [h·d_head, (h+1)·d_head)
// k, v:  [T_k, n_kv_head · d_head]  row strides ldk, ldv
// kv_head_of: [n_head]
// probs: [n_head, T_q, T_k]         written (softmax probabilities; masked entries exactly 0)
// out:   [T_q, n_head · d_head]     row stride ldo — the concatenation of the head outputs
// Query row r has position mask_first_row + r for the causal / window mask.
// probs.then, when set, runs on each head's rows before the call returns; an exception thrown
// there (or in a head) is rethrown by the call once every thread has stopped.
// With out == nullptr only the probabilities are computed (v is not read and may be null).
void attention(const float* q, int64_t ldq, const float* k, int64_t ldk, const float* v, int64_t ldv,
               const int* kv_head_of, const AttentionDims& dims, const KeyMask& mask, int64_t mask_first_row,
               ProbsOut probs, float* out, int64_t ldo);
inline void attention(const float* q, int64_t ldq, const float* k, int64_t ldk, const float* v, int64_t ldv,
                      const int* kv_head_of, const AttentionDims& dims, const KeyMask& mask, int64_t mask_first_row,
                      float* probs, float* out, int64_t ldo) {
  attention(q, ldq, k, ldk, v, ldv, kv_head_of, dims, mask, mask_first_row,
            ProbsOut{probs, dims.T_q * dims.T_k, dims.T_k}, out, ldo);
}

}  // namespace headscope::ops
