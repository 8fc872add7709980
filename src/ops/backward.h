// headscope — the backward of each forward op (reverse mode): given the gradient of a scalar
// metric with respect to an op's output (dy), the gradient with respect to its inputs. Each sits
// beside the op it undoes and follows its shapes and layout; ops/reference/backward.h is the slow
// twin of every one (plain loops in double), and tests/unit/ops_backward_test.cc checks both
// against central finite differences of the forward formulas.
//
// Conventions: row-major; "accumulate" outputs (parameter gradients) are added to, so the
// gradient of a weight used at several rows or in several passes sums; every other output is
// written. dx may alias dy where noted.
#pragma once
#include <cstdint>

#include "ops/rope.h"
#include "tensor/quant_matrix.h"

namespace headscope::ops {

// p = softmax(s) over each row of `cols`: ds = p ⊙ (dp − Σ_k p_k dp_k). Masked keys (p = 0) get 0.
// p, dp, ds: [rows, cols]; ds may alias dp.
void softmax_backward(const float* p, const float* dp, int64_t rows, int64_t cols, float* ds);

// y = (x − μ) / σ · γ + β, σ = √(var + eps): with x̂ = (x − μ)/σ and g = dy ⊙ γ,
//   dx = (g − mean(g) − x̂ · mean(g ⊙ x̂)) / σ,   dγ += Σ_rows dy ⊙ x̂,   dβ += Σ_rows dy.
// x, dy, dx: [T, d]; dgamma, dbeta: [d] (either may be null).
void layer_norm_backward(const float* x, int64_t T, int64_t d, const float* gamma, float eps, const float* dy,
                         float* dx, float* dgamma, float* dbeta);

// y = x / r · γ, r = √(mean(x²) + eps): with g = dy ⊙ γ,
//   dx = g / r − x · Σ(g ⊙ x) / (d · r³),   dγ += Σ_rows dy ⊙ x / r.
void rms_norm_backward(const float* x, int64_t T, int64_t d, const float* gamma, float eps, const float* dy, float* dx,
                       float* dgamma);

// Element-wise activations, from their input x: dx = dy · f'(x). dx may alias dy.
void gelu_erf_backward(const float* x, const float* dy, float* dx, int64_t n);   // f = x Φ(x)
void gelu_tanh_backward(const float* x, const float* dy, float* dx, int64_t n);  // transformers' gelu_pytorch_tanh
// y = silu(gate) ⊙ up:       dgate = dy ⊙ up ⊙ silu'(gate),  dup = dy ⊙ silu(gate).
void silu_mul_backward(const float* gate, const float* up, const float* dy, float* dgate, float* dup, int64_t n);
// y = gelu_tanh(gate) ⊙ up:  the same with gelu_tanh.
void gelu_tanh_mul_backward(const float* gate, const float* up, const float* dy, float* dgate, float* dup, int64_t n);
// y = c · tanh(x / c), from its output y: dx = dy · (1 − (y / c)²). dx may alias dy.
void soft_cap_backward(const float* y, const float* dy, float* dx, int64_t n, float cap);

// y[T, out] = x[T, in] · W[out, in]ᵀ + b:  dx = dy · W (written; may be null),
// dW += dyᵀ · x, db += Σ_rows dy (either may be null). Through ops::matmul (oneDNN's sgemm).
void linear_backward(const float* x, int64_t T, int64_t in, const float* W, int64_t out, const float* dy, float* dx,
                     float* dW, float* db);

// RoPE rotates each pair by +pθ; its backward rotates the gradient by −pθ. dy [T, ld] rows of
// n_heads · d_head, rotated in place into dx (the layout and table rope_apply used).
void rope_backward(float* dy, int64_t ld, int64_t T, int64_t n_heads, int64_t d_head, const RopeTable& table,
                   int64_t d_rot, RopeLayout layout);

// One head: s = scale · q kᵀ (masked keys excluded), [s = c · tanh(s / c) with soft-capping c > 0],
// p = softmax(s), o = p v. From p (as the forward stored it; masked entries 0) and do:
//   dp = do vᵀ,  dv += pᵀ do,  ds = softmax_backward(p, dp) [· (1 − tanh²(s / c))],
//   dq += scale · ds k,  dk += scale · dsᵀ q.
// q, dq: [Tq, ldq]; k, v, dk, dv: [Tk, ldk] (a head's d columns of wider rows); p: [Tq, Tk];
// do: [Tq, ldo]. dp_out (may be null): dp written, [Tq, Tk] — the gradient of the probabilities,
// masked entries included (do · vᵀ there too, as autograd gives it). `scratch`: 2 · Tq · Tk floats.
// dq, dk, dv accumulate (GQA: a KV head sums its group).
void attention_head_backward(const float* q, int64_t ldq, const float* k, const float* v, int64_t ldk, const float* p,
                             const float* d_out, int64_t ldo, int64_t Tq, int64_t Tk, int64_t d, float scale,
                             float softcap, float* dq, float* dk, float* dv, float* dp_out, float* scratch);

// dx[T, in] (+)= dy[T, out] · W[out, in] for a weight held as QuantMatrix: fp32 in one product, a
// GGUF's blocks dequantised a panel of rows at a time (never the whole matrix). `accumulate`: add
// to dx instead of writing it.
// Rows of dy up to which the panels are shared between threads (each with its own [T, in]
// partial of dx): past them one thread's products are large enough for sgemm's own threads, and
// the partials would grow with T.
constexpr int64_t kBackwardSharedPanelsMaxRows = 256;
void quant_linear_backward(const float* dy, int64_t T, const QuantMatrix& W, float* dx, bool accumulate);

}  // namespace headscope::ops
