#include "ops/attention.h"

#include <algorithm>
#include <atomic>
#include <exception>
#include <memory>
#include <thread>
#include <vector>

#include "ops/matmul.h"

namespace headscope::ops {
namespace {

// One head: P_h = softmax(scale · Q_h K_gᵀ + mask) into probs, then O_h = P_h V_g into out.
// scores_done: the head's P already holds scale · Q_h K_gᵀ (computed with its group's, below).
void attend_head(int64_t h, const float* q, int64_t ldq, const float* k, int64_t ldk, const float* v, int64_t ldv,
                 const int* kv_head_of, const AttentionDims& d, const KeyMask& mask, int64_t mask_first_row,
                 const ProbsOut& probs, float* out, int64_t ldo, bool scores_done = false) {
  const int64_t g = kv_head_of[h];
  float* P = probs.data + h * probs.head_stride;                // [T_q, T_k], row stride probs.ld
  const float* Qh = q + h * d.d_head;                           // [T_q, d_head], stride ldq
  const float* Kg = k + g * d.d_head;                           // [T_k, d_head], stride ldk
  const float* Vg = v == nullptr ? nullptr : v + g * d.d_head;  // [T_k, d_head], stride ldv
  if (!scores_done)
    matmul(Qh, ldq, Kg, ldk, P, probs.ld, d.T_q, d.T_k, d.d_head, /*trans_b=*/true, d.scale);  // scale · Q Kᵀ
  softmax_rows(P, d.T_q, d.T_k, probs.ld, mask_first_row, mask);
  if (out != nullptr)
    matmul(P, probs.ld, Vg, ldv, out + h * d.d_head, ldo, d.T_q, d.d_head, d.T_k, /*trans_b=*/false);  // P V
}

// Grouped-query attention: the query heads that share key head g, when the caller allows it
// (probs.group_scores), they are consecutive (h = g·n + i, n = n_head / n_kv_head) and their
// probabilities lie one after the other (head_stride = T_q · ld), have their scores made by one GEMM:
// [n·T_q, d_head] × K_gᵀ, so that K_g is packed once for the n heads instead of n times (at 8,192
// keys, 384 rows against 128 ran at 88 against 72 GFLOP/s on one thread). Each product is the same
// d_head-long dot product; the queries are copied into one block of rows first.
int64_t stacked_heads(const int* kv_head_of, const AttentionDims& d, const ProbsOut& probs) {
  if (!probs.group_scores || d.n_kv_head <= 0 || d.n_head % d.n_kv_head != 0 || d.n_head == d.n_kv_head) return 1;
  if (probs.head_stride != d.T_q * probs.ld) return 1;
  const int64_t n = d.n_head / d.n_kv_head;
  for (int64_t h = 0; h < d.n_head; ++h)
    if (kv_head_of[h] != h / n) return 1;
  return n;
}

void group_scores(int64_t g, int64_t n, const float* q, int64_t ldq, const float* k, int64_t ldk,
                  const AttentionDims& d, const ProbsOut& probs) {
  thread_local std::vector<float> rows;  // [n · T_q, d_head] the group's queries, head after head
  rows.resize(size_t(n * d.T_q * d.d_head));
  for (int64_t i = 0; i < n; ++i)
    for (int64_t r = 0; r < d.T_q; ++r)
      std::copy_n(q + r * ldq + (g * n + i) * d.d_head, d.d_head, rows.data() + (i * d.T_q + r) * d.d_head);
  matmul(rows.data(), d.d_head, k + g * d.d_head, ldk, probs.data + g * n * probs.head_stride, probs.ld, n * d.T_q,
         d.T_k, d.d_head, /*trans_b=*/true, d.scale);
}

// The order of a pool's work. Items below n_units are units of attention (a head, or a group of
// `stack` heads whose scores are one GEMM); from n_units on, item n_units + h·parts + p is part p
// of head h. A unit's heads' parts are queued once the units kLag after it have been queued
// (kLag units of at least two heads), so that a thread taking a part rarely finds its head still
// being computed, and only a few heads' rows are live in cache at once.
std::vector<int64_t> pool_order(int64_t n_head, int64_t stack, int parts) {
  const int64_t units = n_head / stack, lag = (2 + stack - 1) / stack;
  std::vector<int64_t> order;
  order.reserve(size_t(units + n_head * parts));
  for (int64_t s = 0; s < units + lag; ++s) {
    if (s < units) order.push_back(s);
    if (s >= lag)
      for (int64_t h = (s - lag) * stack; h < (s - lag + 1) * stack; ++h)
        for (int p = 0; p < parts; ++p) order.push_back(units + h * parts + p);
  }
  return order;
}

}  // namespace

void attention(const float* q, int64_t ldq, const float* k, int64_t ldk, const float* v, int64_t ldv,
               const int* kv_head_of, const AttentionDims& d, const KeyMask& mask, int64_t mask_first_row,
               ProbsOut probs, float* out, int64_t ldo) {
  // One head per thread; the GEMMs inside run single-threaded (oneDNN detects the parallel region).
  // Short sequences stay on one thread: waking a second one costs more than the work.
  constexpr int64_t kMinParallelScores = 1 << 15;
  const bool parallel = d.n_head * d.T_q * d.T_k >= kMinParallelScores;
  const int64_t stack = stacked_heads(kv_head_of, d, probs), units = d.n_head / stack;
  // Unit u: its heads' attention, the scores of a stacked group first.
  const auto attend_unit = [&](int64_t u, const std::function<void(int64_t head)>& head_done) {
    if (stack > 1) group_scores(u, stack, q, ldq, k, ldk, d, probs);
    for (int64_t h = u * stack; h < (u + 1) * stack; ++h) {
      attend_head(h, q, ldq, k, ldk, v, ldv, kv_head_of, d, mask, mask_first_row, probs, out, ldo, stack > 1);
      head_done(h);
    }
  };
  const HeadFollowUp* then = probs.then;
  if (then == nullptr || then->parts <= 0) {
    const std::function<void(int64_t)> nothing = [](int64_t) {};
#pragma omp parallel for schedule(dynamic, 1) if (parallel)
    for (int64_t u = 0; u < units; ++u) attend_unit(u, nothing);
    return;
  }
  // One pool for the heads and their follow-up parts (HeadFollowUp): a thread takes the next item
  // of pool_order; a part whose head is still being computed waits for it (that head was taken
  // earlier, by a thread that is computing it, so the wait ends).
  const std::vector<int64_t> order = pool_order(d.n_head, stack, then->parts);
  const auto done = std::make_unique<std::atomic<bool>[]>(size_t(d.n_head));
  for (int64_t h = 0; h < d.n_head; ++h) done[size_t(h)].store(false, std::memory_order_relaxed);
  const std::function<void(int64_t)> mark_done = [&](int64_t h) {
    done[size_t(h)].store(true, std::memory_order_release);
  };
  std::atomic<size_t> next{0};
  std::atomic<bool> failed{false};
  std::exception_ptr failure;
#pragma omp parallel if (parallel)
  for (size_t i = next.fetch_add(1); i < order.size(); i = next.fetch_add(1)) {
    const int64_t item = order[i];
    const int64_t h = item < units ? -1 : (item - units) / then->parts;
    try {
      if (item < units) {
        if (!failed.load(std::memory_order_relaxed)) attend_unit(item, mark_done);
      } else {
        while (!done[size_t(h)].load(std::memory_order_acquire)) std::this_thread::yield();
        if (!failed.load(std::memory_order_relaxed)) then->run(h, int((item - units) % then->parts));
      }
    } catch (...) {
#pragma omp critical(headscope_attention_failure)
      if (!failure) failure = std::current_exception();
      failed.store(true, std::memory_order_relaxed);
    }
    // Every head of a unit is marked done, also one skipped or left unfinished by a failure (after
    // `failed` is set, so that a waiting part sees it and does not run).
    if (item < units)
      for (int64_t g = item * stack; g < (item + 1) * stack; ++g) mark_done(g);
  }
  if (failure) std::rethrow_exception(failure);
}

}  // namespace headscope::ops
